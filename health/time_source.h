// Injected time (DESIGN.md §3): everything that decides with time receives a
// TimeSource and, when it needs callbacks, a TimerFactory. Production code
// uses RealTimeSource and AsioTimerFactory; tests use SimulatedTime and fire
// timers by advancing the clock by hand.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

namespace geogate::health {

using MonotonicTime = std::chrono::steady_clock::time_point;
using SystemTime = std::chrono::system_clock::time_point;
using Millis = std::chrono::milliseconds;

/// Nanoseconds since the steady clock's epoch: the form stored in atomics.
inline int64_t ToNanos(MonotonicTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
inline MonotonicTime FromNanos(int64_t ns) {
  return MonotonicTime(
      std::chrono::duration_cast<MonotonicTime::duration>(std::chrono::nanoseconds(ns)));
}

class TimeSource {
 public:
  virtual ~TimeSource() = default;
  /// @return the monotonic time, for intervals and deadlines.
  virtual MonotonicTime monotonic() const = 0;
  /// @return the wall-clock time, for logs and reports only.
  virtual SystemTime system() const = 0;
};

/// A one-shot timer. Re-arming replaces the pending expiry.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void enable(Millis after) = 0;
  /// Fires at `at` or after it, never before. A timer that keeps absolute
  /// deadlines arms for `at` without reading the clock; the default reads
  /// `time` once and rounds the wait up to whole milliseconds.
  virtual void enable_at(MonotonicTime at, const TimeSource& time) {
    enable(std::max(std::chrono::ceil<Millis>(at - time.monotonic()), Millis(0)));
  }
  virtual void disable() = 0;
  virtual bool enabled() const = 0;
};
using TimerPtr = std::unique_ptr<Timer>;

class TimerFactory {
 public:
  virtual ~TimerFactory() = default;
  /// @param cb runs on the factory's thread when the timer fires.
  virtual TimerPtr create(std::function<void()> cb) = 0;
};

class RealTimeSource final : public TimeSource {
 public:
  MonotonicTime monotonic() const override { return std::chrono::steady_clock::now(); }
  SystemTime system() const override { return std::chrono::system_clock::now(); }
};

}  // namespace geogate::health
