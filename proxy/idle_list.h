// A worker's client connections that wait for the client (for its first
// request or the next one on a keep-alive connection), oldest first. When
// the process is at gateway.limits.max_connections, a new connection closes
// the one idle longest, as NGINX reuses its oldest idle connections.
//
// The list is two: connections that went idle recently, and those idle
// long enough to be parked (Session::RequestPark: the connection gives up
// its coroutine frames until its client sends again). The worker's
// housekeeping moves the second kind over with TakeIdleSince, which visits
// each connection once however long it stays idle.
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
  bool long_idle = false;  // in the list of those TakeIdleSince handed out
};

class IdleList {
 public:
  IdleList() = default;
  IdleList(const IdleList&) = delete;
  IdleList& operator=(const IdleList&) = delete;
  ~IdleList() {
    recent_.clear();
    long_.clear();
  }

  /// `h` became idle at `now_ns` (monotonic, not earlier than the last one).
  void Push(IdleHook& h, int64_t now_ns) {
    if (h.is_linked()) return;
    h.idle_since_ns = now_ns;
    h.long_idle = false;
    recent_.push_back(h);
    if (Oldest() == &h) Publish();
  }
  /// `h` is no longer idle (or is going away); no-op when it was not idle.
  void Remove(IdleHook& h) {
    if (!h.is_linked()) return;
    bool front = Oldest() == &h;
    List& l = h.long_idle ? long_ : recent_;
    l.erase(l.iterator_to(h));
    h.long_idle = false;
    if (front) Publish();
  }
  /// Hands every connection idle since `cutoff_ns` or earlier that no
  /// earlier call handed out to `f` (oldest first), and keeps it in the
  /// list, behind none of the others. `f` may Remove it.
  template <class F>
  void TakeIdleSince(int64_t cutoff_ns, F&& f) {
    while (!recent_.empty() && recent_.front().idle_since_ns <= cutoff_ns) {
      IdleHook& h = recent_.front();
      recent_.pop_front();
      h.long_idle = true;
      long_.push_back(h);
      f(h);
    }
  }
  /// The one idle longest, or nullptr.
  IdleHook* Oldest() {
    if (!long_.empty()) return &long_.front();
    return recent_.empty() ? nullptr : &recent_.front();
  }
  bool empty() const { return recent_.empty() && long_.empty(); }
  size_t size() const { return recent_.size() + long_.size(); }
  /// How many TakeIdleSince handed out that are still idle.
  size_t long_idle() const { return long_.size(); }
  /// When the oldest went idle, or kNoIdle. Readable from any thread.
  int64_t oldest_since_ns() const { return oldest_since_.load(std::memory_order_relaxed); }

 private:
  using List = boost::intrusive::list<IdleHook, boost::intrusive::constant_time_size<true>>;
  void Publish() {
    const IdleHook* h = Oldest();
    oldest_since_.store(h == nullptr ? kNoIdle : h->idle_since_ns, std::memory_order_relaxed);
  }

  List recent_;
  List long_;  // all idle since before any in recent_
  std::atomic<int64_t> oldest_since_{kNoIdle};
};

}  // namespace geogate::proxy
