#include "proxy/watchdog.h"

#include <algorithm>

namespace geogate::proxy {

WatchdogWake OnWatchdogWake(WatchdogClock::time_point now, WatchdogClock::time_point deadline,
                            WatchdogClock::time_point next_poll,
                            std::chrono::milliseconds poll_period) {
  constexpr auto kNever = WatchdogClock::time_point::max();
  WatchdogWake w;
  w.expire = deadline != kNever && now >= deadline;
  if (w.expire) return w;  // the guarded stream is closed: nothing left to watch
  w.poll = next_poll != kNever && now >= next_poll;
  w.next_poll = w.poll ? now + poll_period : next_poll;
  w.sleep_until = std::min(deadline, w.next_poll);
  return w;
}

bool WatchdogNeedsRearm(bool armed, WatchdogClock::time_point armed_at,
                        WatchdogClock::time_point wanted) {
  if (wanted == WatchdogClock::time_point::max()) return false;
  return !armed || wanted < armed_at;
}

Watchdog::Watchdog(health::TimerFactory& timers, const health::TimeSource& time)
    : time_(time), timer_(timers.create([this] { Wake(); })) {}

void Watchdog::Guard(Stream* target, Clock::time_point deadline, OnExpiry what) {
  target_ = target;
  deadline_ = deadline;
  on_expiry_ = what;
  Want(deadline);
}

void Watchdog::PollHealth(const health::BackendState* backend, std::chrono::milliseconds period,
                          Clock::time_point now, std::function<void()> on_poll) {
  backend_ = backend;
  on_poll_ = std::move(on_poll);
  period_ = period;
  next_poll_ = now + period;
  Want(next_poll_);
}

void Watchdog::StopPolling() {
  backend_ = nullptr;
  on_poll_ = nullptr;
  next_poll_ = Clock::time_point::max();
}

void Watchdog::Disarm() {
  target_ = nullptr;
  deadline_ = Clock::time_point::max();
  StopPolling();
  expired_ = false;
  abandoned_ = false;
}

void Watchdog::Want(Clock::time_point at) {
  if (!WatchdogNeedsRearm(timer_->enabled(), armed_at_, at)) return;
  armed_at_ = at;
  // Never early (an early wake would only sleep again for the remainder).
  // A worker's timer is an entry of its deadline heap, which arms for `at`
  // without reading the clock.
  timer_->enable_at(at, time_);
}

void Watchdog::Wake() {
  WatchdogWake w = OnWatchdogWake(time_.monotonic(), deadline_, next_poll_, period_);
  if (w.expire) {
    expired_ = true;
    deadline_ = Clock::time_point::max();
    next_poll_ = Clock::time_point::max();
    if (target_ != nullptr) {
      if (on_expiry_ == OnExpiry::kInterrupt)
        target_->interrupt();
      else
        target_->close();
    }
    return;
  }
  if (w.poll) {
    // routable() ignores its argument (ejection is cleared only by a probe).
    if (backend_ != nullptr && !backend_->routable(0)) {
      abandoned_ = true;
      deadline_ = Clock::time_point::max();
      next_poll_ = Clock::time_point::max();
      if (target_ != nullptr) target_->close();
      return;
    }
    if (on_poll_) on_poll_();
  }
  next_poll_ = w.next_poll;
  Want(w.sleep_until);
}

}  // namespace geogate::proxy
