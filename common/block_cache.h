// Per-thread free lists of small blocks, and an allocator over them for the
// containers every request fills (the Beast field lists of the client's
// request head and of the backend's response head, one block per field),
// its pooled texts and its large pooled objects (MakePooled).
//
// glibc's per-thread cache keeps seven blocks per 16-byte size, fewer than
// one request's fields need once a worker interleaves many requests, and
// the rest went through malloc's slower paths. Here a block is ordinary
// operator-new memory rounded up to a size class (every 64 bytes from 64
// to 1024), so a block freed on another thread simply joins that thread's
// list; each list keeps at most kMaxCachedBytes of blocks and larger
// requests go straight to operator new.
//
// Header-only. Asio's coroutine frames do not come here but from malloc
// (BOOST_ASIO_DISABLE_AWAITABLE_FRAME_RECYCLING, top-level CMakeLists.txt):
// the hook that sent them here specialised an Asio internal and is gone
// (bench/RESULTS.md, "Coroutine frames from malloc").
//
// The A/B of bench/ab builds the gateway once with GEOGATE_AB_NO_BLOCK_CACHE
// defined (in every translation unit): Allocate and Deallocate are then
// plain operator new and delete, so everything above goes to malloc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

namespace geogate::common {

namespace block_cache {

// Per size class and thread. Enough for the churn of 64 streams finishing
// and starting in one pass of a worker (each holds a dozen field blocks
// and a few pooled texts); a cap of 256 blocks per class spilled 2.6
// field blocks per SSE request to malloc under wrk -c64.
inline constexpr std::size_t kMaxCachedBytes = 256 * 1024;
// Classes every 64 bytes: a block is at most 63 bytes larger than asked.
// With the classes doubling (64, 128, 256, 512, then 768 and 1024), what
// every connection holds paid for the rounding (then coroutine frames too:
// a 416-byte frame took 512 bytes), and an open stream lost 0.8 KiB in all
// (bench/RESULTS.md, "Idle connections park").
inline constexpr std::size_t kClassStep = 64;
inline constexpr std::size_t kLargestBlock = 1024;  // larger: operator new
inline constexpr std::size_t kClasses = kLargestBlock / kClassStep;

namespace detail {

/// The class serving `bytes`, or -1 when larger than every class.
constexpr int ClassOf(std::size_t bytes) {
  if (bytes > kLargestBlock) return -1;
  return bytes == 0 ? 0 : static_cast<int>((bytes - 1) / kClassStep);
}
/// The size of class `c`'s blocks.
constexpr std::size_t ClassBytes(int c) {
  return (static_cast<std::size_t>(c) + 1) * kClassStep;
}

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible, so it stays usable after the thread's Drain ran
// (a block freed later in the thread's exit goes back to operator delete).
struct Lists {
  std::array<FreeBlock*, kClasses> head;
  std::array<uint32_t, kClasses> count;
  bool registered;
  bool closed;
};
inline thread_local Lists t_lists{};

// Returns the thread's cached blocks when the thread ends.
struct Drain {
  ~Drain() {
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = t_lists.head[c]) {
        t_lists.head[c] = b->next;
        ::operator delete(b);
      }
      t_lists.count[c] = 0;
    }
    t_lists.closed = true;
  }
};
inline thread_local Drain t_drain;

}  // namespace detail

/// At least `bytes`, aligned for any fundamental type.
inline void* Allocate(std::size_t bytes) {
#ifdef GEOGATE_AB_NO_BLOCK_CACHE
  return ::operator new(bytes);
#endif
  int c = detail::ClassOf(bytes);
  if (c < 0) return ::operator new(bytes);
  detail::Lists& l = detail::t_lists;
  if (detail::FreeBlock* b = l.head[c]) {
    l.head[c] = b->next;
    --l.count[c];
    return b;
  }
  return ::operator new(detail::ClassBytes(c));
}

/// `bytes` as given to Allocate.
inline void Deallocate(void* p, std::size_t bytes) noexcept {
#ifdef GEOGATE_AB_NO_BLOCK_CACHE
  (void)bytes;
  ::operator delete(p);
  return;
#endif
  int c = detail::ClassOf(bytes);
  if (c < 0) {
    ::operator delete(p);
    return;
  }
  detail::Lists& l = detail::t_lists;
  if (l.closed || l.count[c] >= kMaxCachedBytes / detail::ClassBytes(c)) {
    ::operator delete(p);
    return;
  }
  if (!l.registered) {
    l.registered = true;
    (void)&detail::t_drain;  // constructs it, so its destructor runs at thread exit
  }
  auto* b = static_cast<detail::FreeBlock*>(p);
  b->next = l.head[c];
  l.head[c] = b;
  ++l.count[c];
}

/// Blocks on this thread's free lists (for tests).
inline std::size_t CachedBlocks() {
  std::size_t n = 0;
  for (uint32_t c : detail::t_lists.count)
    n += c;
  return n;
}

/// How many blocks of the class serving `bytes` a thread keeps (for tests).
inline std::size_t MaxCached(std::size_t bytes) {
  int c = detail::ClassOf(bytes);
  return c < 0 ? 0 : kMaxCachedBytes / detail::ClassBytes(c);
}

}  // namespace block_cache

template <class T>
class PooledAllocator {
 public:
  using value_type = T;
  using is_always_equal = std::true_type;
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);

  PooledAllocator() noexcept = default;
  template <class U>
  PooledAllocator(const PooledAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(std::size_t n) { return static_cast<T*>(block_cache::Allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { block_cache::Deallocate(p, n * sizeof(T)); }

  template <class U>
  bool operator==(const PooledAllocator<U>&) const noexcept {
    return true;
  }
};

/// A string whose buffer comes from the block cache: for the per-request
/// texts that outgrow the small-string buffer (a response head, ids).
using PooledString = std::basic_string<char, std::char_traits<char>, PooledAllocator<char>>;
/// The longest text a 512-byte block holds with its terminator: what the
/// per-request texts reserve (a larger class would only cost memory).
inline constexpr std::size_t kPooledStringMax = 512 - 1;

/// One object in a pooled block: for large objects that would otherwise
/// sit in a coroutine frame, which comes from malloc (a block comes from
/// this thread's lists, and can be given back before the frame ends).
template <class T>
struct PooledDelete {
  void operator()(T* p) const noexcept {
    p->~T();
    block_cache::Deallocate(p, sizeof(T));
  }
};
template <class T>
using PooledPtr = std::unique_ptr<T, PooledDelete<T>>;

template <class T, class... Args>
PooledPtr<T> MakePooled(Args&&... args) {
  void* mem = block_cache::Allocate(sizeof(T));
  try {
    return PooledPtr<T>(new (mem) T(std::forward<Args>(args)...));
  } catch (...) {
    block_cache::Deallocate(mem, sizeof(T));
    throw;
  }
}

}  // namespace geogate::common
