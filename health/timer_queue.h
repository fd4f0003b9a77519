// Many one-shot timers on one: the deadlines of a worker's connections.
//
// Every client connection and every stream has a Watchdog, and every
// Watchdog had a timer of its own on the io_context: an Asio steady_timer,
// a shared state that outlives it, and a pending wait operation, about
// 0.35 KiB per idle connection, and a cancel, a queued completion and a new
// wait each time a deadline moved earlier (every request's first-byte
// health poll). A TimerQueue hands out timers that are entries in a binary
// heap ordered by deadline, and keeps one timer of its base factory armed
// for the earliest of them (as HAProxy's and NGINX's event loops keep their
// connection timeouts in one tree). Arming, moving and disarming an entry
// touch the heap only; the base timer is re-armed only when the earliest
// deadline moves earlier, and a disarmed earliest entry costs at most one
// wake that finds nothing due.
//
// When the base fires, the entries then due fire in deadline order (ties in
// the order they were armed); an entry armed while they fire waits for the
// next wake, even if already due, as a completion posted to the io_context
// would. Single-threaded: every call on the thread that runs the base's
// callbacks.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "health/time_source.h"

namespace geogate::health {

class TimerQueue final : public TimerFactory {
 public:
  /// @param base where the one timer comes from (a worker's io_context;
  ///        tests: simulated time). @param time what "now" is.
  TimerQueue(TimerFactory& base, const TimeSource& time);
  /// Every timer it made must be gone before it (asserted in debug builds).
  ~TimerQueue() override;
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // health::TimerFactory
  TimerPtr create(std::function<void()> cb) override;

  /// Releases the base timer: nothing fires any more; timers may still be
  /// armed, disarmed and destroyed. For teardown: a worker's connections
  /// (and their timers) go with its io_context, which the base timer must
  /// not outlive.
  void Shutdown();

  /// Timers armed now.
  size_t armed() const { return heap_.size(); }

  class Entry;

 private:
  friend class Entry;
  void Arm(Entry* e, MonotonicTime at);
  void Disarm(Entry* e);
  void Fire();
  /// Arms the base for `at` unless it wakes by then already.
  void WakeBy(MonotonicTime at);
  void SiftUp(size_t i);
  void SiftDown(size_t i);
  void Place(Entry* e, size_t i);

  const TimeSource& time_;
  TimerPtr base_;
  bool base_armed_ = false;
  MonotonicTime base_at_{};  // when the base, if armed, wakes
  std::vector<Entry*> heap_;
  uint64_t arm_seq_ = 0;
  bool firing_ = false;  // Fire is running: it re-arms the base at its end
  size_t live_ = 0;      // timers made and not yet destroyed
};

}  // namespace geogate::health
