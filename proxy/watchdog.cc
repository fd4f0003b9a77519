#include "proxy/watchdog.h"

#include <algorithm>

namespace geogate::gateway {

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

Watchdog::Watchdog(net::io_context& ioc, const health::TimeSource& time)
    : st_(std::make_shared<State>(ioc, time)) {}

Watchdog::~Watchdog() {
  st_->alive = false;
  st_->target = nullptr;
  st_->backend = nullptr;
  st_->on_poll = nullptr;
  if (st_->armed) st_->timer.cancel();
}

void Watchdog::Guard(Stream* target, Clock::time_point deadline) {
  st_->target = target;
  st_->deadline = deadline;
  Want(st_, deadline);
}

void Watchdog::PollHealth(const health::BackendState* backend, std::chrono::milliseconds period,
                          std::function<void()> on_poll) {
  st_->backend = backend;
  st_->on_poll = std::move(on_poll);
  st_->period = period;
  st_->next_poll = st_->time.monotonic() + period;
  Want(st_, st_->next_poll);
}

void Watchdog::StopPolling() {
  st_->backend = nullptr;
  st_->on_poll = nullptr;
  st_->next_poll = Clock::time_point::max();
}

void Watchdog::Disarm() {
  st_->target = nullptr;
  st_->deadline = Clock::time_point::max();
  StopPolling();
  st_->expired = false;
  st_->abandoned = false;
}

void Watchdog::Want(const std::shared_ptr<State>& st, Clock::time_point at) {
  if (WatchdogNeedsRearm(st->armed, st->armed_at, at)) Arm(st, at);
}

void Watchdog::Arm(const std::shared_ptr<State>& st, Clock::time_point at) {
  st->armed = true;
  st->armed_at = at;
  uint64_t generation = ++st->generation;
  // Relative to the TimeSource's now, so the deadline is in its time.
  st->timer.expires_after(at - st->time.monotonic());  // a pending wait ends with operation_aborted
  st->timer.async_wait([st, generation](boost::system::error_code) {
    if (!st->alive || generation != st->generation) return;
    st->armed = false;
    Wake(st);
  });
}

void Watchdog::Wake(const std::shared_ptr<State>& st) {
  WatchdogWake w = OnWatchdogWake(st->time.monotonic(), st->deadline, st->next_poll, st->period);
  if (w.expire) {
    st->expired = true;
    st->deadline = Clock::time_point::max();
    st->next_poll = Clock::time_point::max();
    if (st->target != nullptr) st->target->close();
    return;
  }
  if (w.poll) {
    // routable() ignores its argument (ejection is cleared only by a probe).
    if (st->backend != nullptr && !st->backend->routable(0)) {
      st->abandoned = true;
      st->deadline = Clock::time_point::max();
      st->next_poll = Clock::time_point::max();
      if (st->target != nullptr) st->target->close();
      return;
    }
    if (st->on_poll) st->on_poll();
  }
  st->next_poll = w.next_poll;
  Want(st, w.sleep_until);
}

}  // namespace geogate::gateway
