// Per-thread free lists of small blocks, and an allocator over them for the
// containers every request fills: the Beast field lists of the client's
// request head and of the backend's response head, one block per field.
//
// glibc's per-thread cache keeps seven blocks per 16-byte size, fewer than
// one request's fields need once a worker interleaves many requests, and
// the rest went through malloc's slower paths (a sixth of a proxied
// request's heap allocations were field blocks). Here a block is ordinary
// operator-new memory rounded up to a size class (64 to 512 bytes), so a
// block freed on another thread simply joins that thread's list; each list
// keeps at most kMaxCachedBytes of blocks (so a thread holds at most 512 KiB
// in its four lists) and larger requests go straight to operator new.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

namespace geogate::gateway {

namespace block_cache {

// Per size class and thread. Enough for the churn of 64 streams finishing
// and starting in one pass of a worker (each holds a dozen field blocks);
// a cap of 256 blocks per class spilled 2.6 field blocks per SSE request
// to malloc under wrk -c64.
inline constexpr std::size_t kMaxCachedBytes = 128 * 1024;
inline constexpr std::size_t kLargestBlock = 512;  // larger requests go to operator new

/// At least `bytes`, aligned for any fundamental type.
void* Allocate(std::size_t bytes);
/// `bytes` as given to Allocate.
void Deallocate(void* p, std::size_t bytes) noexcept;

/// Blocks on this thread's free lists (for tests).
std::size_t CachedBlocks();
/// How many blocks of the class serving `bytes` a thread keeps (for tests).
std::size_t MaxCached(std::size_t bytes);

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
/// texts that outgrow the small-string buffer (a response head, ids). Up to
/// kPooledStringMax characters (a block with the terminator) stay cached.
using PooledString = std::basic_string<char, std::char_traits<char>, PooledAllocator<char>>;
inline constexpr std::size_t kPooledStringMax = block_cache::kLargestBlock - 1;

/// One object in a pooled block: for large objects that would otherwise
/// sit in a coroutine frame and push it past Asio's 1 KiB recycling limit.
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

}  // namespace geogate::gateway
