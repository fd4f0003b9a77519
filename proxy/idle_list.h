// A worker's client connections that wait for the client (for its first
// request or the next one on a keep-alive connection), oldest first. When
// the process is at gateway.limits.max_connections, a new connection closes
// the one idle longest, as NGINX reuses its oldest idle connections.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <boost/intrusive/list.hpp>

namespace geogate::proxy {

/// "No idle connection" for IdleList::oldest_since_ns.
inline constexpr int64_t kNoIdle = std::numeric_limits<int64_t>::max();

/// Base of what an IdleList holds (a Session); unlinked by its owner.
struct IdleHook
    : boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>> {
  int64_t idle_since_ns = 0;
};

class IdleList {
 public:
  IdleList() = default;
  IdleList(const IdleList&) = delete;
  IdleList& operator=(const IdleList&) = delete;
  ~IdleList() { list_.clear(); }

  /// `h` became idle at `now_ns` (monotonic, not earlier than the last one).
  void Push(IdleHook& h, int64_t now_ns) {
    if (h.is_linked()) return;
    h.idle_since_ns = now_ns;
    list_.push_back(h);
    if (&list_.front() == &h) Publish();
  }
  /// `h` is no longer idle (or is going away); no-op when it was not idle.
  void Remove(IdleHook& h) {
    if (!h.is_linked()) return;
    bool front = &list_.front() == &h;
    list_.erase(list_.iterator_to(h));
    if (front) Publish();
  }
  /// The one idle longest, or nullptr.
  IdleHook* Oldest() { return list_.empty() ? nullptr : &list_.front(); }
  bool empty() const { return list_.empty(); }
  size_t size() const { return list_.size(); }
  /// When the oldest went idle, or kNoIdle. Readable from any thread.
  int64_t oldest_since_ns() const { return oldest_since_.load(std::memory_order_relaxed); }

 private:
  void Publish() {
    oldest_since_.store(list_.empty() ? kNoIdle : list_.front().idle_since_ns,
                        std::memory_order_relaxed);
  }

  boost::intrusive::list<IdleHook> list_;
  std::atomic<int64_t> oldest_since_{kNoIdle};
};

}  // namespace geogate::proxy
