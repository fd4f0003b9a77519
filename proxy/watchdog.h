// A per-connection deadline that is cheap to move.
//
// Beast's tcp_stream arms and cancels a timer around every read and write:
// a timer-queue insert, a cancel and one more completion handler through the
// worker's queue each time. Relaying a stream token by token, that was twice
// per token, and it made every pass over the ready queue (what a new
// request's time to first token waits for) three times as long as the token
// relays themselves. A Watchdog keeps one timer per connection instead:
// moving the deadline later is a store; the timer, waking at the old time,
// goes back to sleep until the new one; only an earlier deadline re-arms it
// at once (as HAProxy and NGINX keep their connection timeouts).
//
// While a request waits for its first byte the Watchdog also polls the
// backend's health, so an attempt on a backend the prober has taken out of
// rotation is abandoned within one poll period.
//
// It is the one deadline mechanism of a client connection (its head, body,
// writes, TLS handshake and shutdown, idle keep-alive) and of the upstream
// connection serving it. Its timer comes from a health::TimerFactory: in a
// worker, an entry of the worker's health::TimerQueue (one heap of deadlines
// on one io_context timer), so arming it touches no Asio state; in tests,
// simulated time fires every deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "health/backend_state.h"
#include "health/time_source.h"
#include "proxy/stream.h"

namespace geogate::proxy {

using WatchdogClock = std::chrono::steady_clock;

/// What the Watchdog does when its timer wakes at `now` (pure; unit-tested).
struct WatchdogWake {
  bool poll = false;    // check the polled backend now
  bool expire = false;  // the deadline has passed: close the guarded stream
  WatchdogClock::time_point next_poll = WatchdogClock::time_point::max();
  WatchdogClock::time_point sleep_until = WatchdogClock::time_point::max();  // max: stay idle
};

/// `deadline` and `next_poll` are time_point::max() when unset; a due poll
/// schedules the next one `poll_period` after `now`.
WatchdogWake OnWatchdogWake(WatchdogClock::time_point now, WatchdogClock::time_point deadline,
                            WatchdogClock::time_point next_poll,
                            std::chrono::milliseconds poll_period);

/// Whether a wake-up wanted at `wanted` needs the timer re-armed now: only
/// when it is not armed or armed for later.
bool WatchdogNeedsRearm(bool armed, WatchdogClock::time_point armed_at,
                        WatchdogClock::time_point wanted);

class Watchdog {
 public:
  using Clock = WatchdogClock;

  /// What a passed deadline does to the guarded stream.
  enum class OnExpiry {
    kClose,      // close it: every pending operation fails
    kInterrupt,  // end its pending operations but keep it open (a 408 still goes out)
  };

  /// @param timers where the one timer comes from (the worker's; tests:
  ///        simulated time). @param time what "now" is.
  Watchdog(health::TimerFactory& timers, const health::TimeSource& time);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Closes (or interrupts) `target` once `deadline` passes, unless Guard
  /// or Disarm is called again before.
  void Guard(Stream* target, Clock::time_point deadline, OnExpiry what = OnExpiry::kClose);
  /// Until StopPolling or Disarm: every `period` from `now` (the caller's
  /// clock reading), closes the guarded stream when `backend` is no longer
  /// routable (abandoned() then says so), and otherwise calls `on_poll`
  /// (work that only a request still waiting after a poll period needs).
  void PollHealth(const health::BackendState* backend, std::chrono::milliseconds period,
                  Clock::time_point now, std::function<void()> on_poll = nullptr);
  void StopPolling();
  /// Guards nothing and clears the flags; the timer lapses by itself.
  void Disarm();

  /// The guarded stream was closed because its deadline passed.
  bool expired() const { return expired_; }
  /// The guarded stream was closed because the polled backend left rotation.
  bool abandoned() const { return abandoned_; }

 private:
  void Want(Clock::time_point at);
  void Wake();

  const health::TimeSource& time_;
  health::TimerPtr timer_;  // its callback is Wake; destroying it recalls a queued one
  Stream* target_ = nullptr;
  Clock::time_point deadline_ = Clock::time_point::max();
  OnExpiry on_expiry_ = OnExpiry::kClose;
  const health::BackendState* backend_ = nullptr;
  std::chrono::milliseconds period_{};
  Clock::time_point next_poll_ = Clock::time_point::max();
  std::function<void()> on_poll_;
  Clock::time_point armed_at_{};  // when the timer, if enabled, wakes
  bool expired_ = false;
  bool abandoned_ = false;
};

}  // namespace geogate::proxy
