// Where a reload's runtime is published, and each worker's view of it.
//
// The server stores a new runtime in the RuntimeSlot before it says the
// reload is applied. A worker holds its own copy (LocalRuntime), so pinning
// the runtime per request touches only a worker-local reference count, and
// compares generations when a request's head is complete: one load of a
// line that is written once per reload. So every request is decided under
// the runtime published last before its head was complete (DESIGN.md §8,
// "Snapshot per request"), whether or not the worker has yet run the
// notification the server posted to it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace geogate::proxy {

struct Runtime;
using RuntimeConstPtr = std::shared_ptr<const Runtime>;
/// A worker-local handle on a Runtime. Requests copy this shared_ptr (a
/// worker-local reference count) instead of the global one, so pinning a
/// snapshot per request does not bounce a cache line between cores.
using PinnedRuntime = std::shared_ptr<const RuntimeConstPtr>;

class RuntimeSlot {
 public:
  /// Thread-safe. Generations must grow from one call to the next.
  void Publish(RuntimeConstPtr runtime);
  /// Thread-safe: the generation published last (0: none yet).
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  /// Thread-safe: the runtime published last; at least as new as any
  /// generation() read before.
  RuntimeConstPtr Load() const;

 private:
  // A mutex, not std::atomic<std::shared_ptr>: ThreadSanitizer reports a
  // race inside libstdc++ 12's atomic shared_ptr (its lock bit), whatever
  // the memory order. The lock is taken once per reload per worker; the
  // request path reads only generation_.
  mutable std::mutex mu_;
  RuntimeConstPtr runtime_;
  std::atomic<uint64_t> generation_{0};
};

/// One worker's copy. Not thread-safe: its worker's thread only.
class LocalRuntime {
 public:
  explicit LocalRuntime(const RuntimeSlot& slot) : slot_(slot) {}

  /// Takes `runtime` unless the one held is as new or newer (a notification
  /// that arrives after a request already adopted a later reload must not
  /// take the worker back). @return whether it was taken.
  bool Adopt(RuntimeConstPtr runtime);
  /// Adopts the slot's runtime when it is newer than the one held.
  /// @return whether it did.
  bool Refresh();
  /// The one held (null before the first Adopt).
  const PinnedRuntime& held() const { return held_; }
  uint64_t generation() const { return generation_; }

 private:
  const RuntimeSlot& slot_;
  PinnedRuntime held_;
  uint64_t generation_ = 0;
};

}  // namespace geogate::proxy
