// Simulated time for tests (DESIGN.md §3): a clock that moves only when told,
// and timers that fire when the clock passes their deadline. Single-threaded:
// everything runs on the thread that calls advance().
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "health/time_source.h"

namespace geogate::health {

class SimulatedTime final : public TimeSource, public TimerFactory {
 public:
  /// Starts one hour after the steady clock's epoch, so that 0 ns (the
  /// "never" of BackendState atomics) is never a time the test reaches.
  SimulatedTime();
  ~SimulatedTime() override;
  SimulatedTime(const SimulatedTime&) = delete;
  SimulatedTime& operator=(const SimulatedTime&) = delete;

  // health::TimeSource
  MonotonicTime monotonic() const override { return now_; }
  SystemTime system() const override;

  // health::TimerFactory
  TimerPtr create(std::function<void()> cb) override;

  /// Moves the clock forward by `d`, firing every timer due on the way in
  /// deadline order (ties in the order they were armed). Timers armed by
  /// callbacks during the advance fire too when they fall inside the window.
  /// The clock reads each timer's deadline while its callback runs.
  void advance(Millis d);
  /// Moves the clock to `t` (never backwards), firing due timers like advance().
  void SetMonotonic(MonotonicTime t);
  /// Advances in `step`s until `done()` holds or `limit` has passed.
  /// @return true when `done()` held.
  bool AdvanceUntil(const std::function<bool()>& done, Millis limit, Millis step = Millis(1));

  /// Timers currently armed.
  size_t enabled_timers() const;

  class SimTimer;

 private:
  friend class SimTimer;
  void add(SimTimer* t) { timers_.push_back(t); }
  void remove(SimTimer* t);

  MonotonicTime now_;
  SystemTime system_start_;
  MonotonicTime monotonic_start_;
  uint64_t arm_seq_ = 0;
  std::vector<SimTimer*> timers_;
};

}  // namespace geogate::health
