#include "gateway/block_cache.h"

#include <array>
#include <cstdint>

namespace geogate::gateway::block_cache {

namespace {

constexpr std::array<std::size_t, 4> kClassBytes{64, 128, 256, kLargestBlock};

int ClassOf(std::size_t bytes) {
  for (size_t c = 0; c < kClassBytes.size(); ++c)
    if (bytes <= kClassBytes[c]) return static_cast<int>(c);
  return -1;
}

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible, so it stays usable after the thread's Drain ran
// (a block freed later in the thread's exit goes back to operator delete).
struct Lists {
  std::array<FreeBlock*, kClassBytes.size()> head;
  std::array<uint32_t, kClassBytes.size()> count;
  bool registered;
  bool closed;
};
thread_local Lists t_lists{};

// Returns the thread's cached blocks when the thread ends.
struct Drain {
  ~Drain() {
    for (size_t c = 0; c < kClassBytes.size(); ++c) {
      while (FreeBlock* b = t_lists.head[c]) {
        t_lists.head[c] = b->next;
        ::operator delete(b, kClassBytes[c]);
      }
      t_lists.count[c] = 0;
    }
    t_lists.closed = true;
  }
};
thread_local Drain t_drain;

}  // namespace

void* Allocate(std::size_t bytes) {
  int c = ClassOf(bytes);
  if (c < 0) return ::operator new(bytes);
  Lists& l = t_lists;
  if (FreeBlock* b = l.head[c]) {
    l.head[c] = b->next;
    --l.count[c];
    return b;
  }
  return ::operator new(kClassBytes[c]);
}

void Deallocate(void* p, std::size_t bytes) noexcept {
  int c = ClassOf(bytes);
  if (c < 0) {
    ::operator delete(p, bytes);
    return;
  }
  Lists& l = t_lists;
  if (l.closed || l.count[c] >= kMaxCachedBytes / kClassBytes[c]) {
    ::operator delete(p, kClassBytes[c]);
    return;
  }
  if (!l.registered) {
    l.registered = true;
    (void)&t_drain;  // constructs it, so its destructor runs at thread exit
  }
  auto* b = static_cast<FreeBlock*>(p);
  b->next = l.head[c];
  l.head[c] = b;
  ++l.count[c];
}

std::size_t CachedBlocks() {
  std::size_t n = 0;
  for (uint32_t c : t_lists.count)
    n += c;
  return n;
}

std::size_t MaxCached(std::size_t bytes) {
  int c = ClassOf(bytes);
  return c < 0 ? 0 : kMaxCachedBytes / kClassBytes[c];
}

}  // namespace geogate::gateway::block_cache
