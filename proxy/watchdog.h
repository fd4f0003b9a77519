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
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "health/backend_state.h"
#include "health/time_source.h"
#include "proxy/stream.h"

namespace geogate::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;

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

  /// @param time what "now" is; the timer waits out the difference to a
  ///        deadline on `ioc`.
  Watchdog(net::io_context& ioc, const health::TimeSource& time);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Closes `target` (so its pending operation fails) once `deadline`
  /// passes, unless Guard or Disarm is called again before.
  void Guard(Stream* target, Clock::time_point deadline);
  /// Until StopPolling or Disarm: every `period`, closes the guarded stream
  /// when `backend` is no longer routable (abandoned() then says so), and
  /// otherwise calls `on_poll` (work that only a request still waiting
  /// after a poll period needs).
  void PollHealth(const health::BackendState* backend, std::chrono::milliseconds period,
                  std::function<void()> on_poll = nullptr);
  void StopPolling();
  /// Guards nothing and clears the flags; the timer lapses by itself.
  void Disarm();

  /// The guarded stream was closed because its deadline passed.
  bool expired() const { return st_->expired; }
  /// The guarded stream was closed because the polled backend left rotation.
  bool abandoned() const { return st_->abandoned; }

 private:
  struct State {
    State(net::io_context& ioc, const health::TimeSource& t) : timer(ioc), time(t) {}
    net::steady_timer timer;
    const health::TimeSource& time;
    Stream* target = nullptr;
    Clock::time_point deadline = Clock::time_point::max();
    const health::BackendState* backend = nullptr;
    std::chrono::milliseconds period{};
    Clock::time_point next_poll = Clock::time_point::max();
    std::function<void()> on_poll;
    bool armed = false;
    Clock::time_point armed_at{};
    uint64_t generation = 0;  // tells a superseded wait's handler to do nothing
    bool alive = true;
    bool expired = false;
    bool abandoned = false;
  };
  static void Want(const std::shared_ptr<State>& st, Clock::time_point at);
  static void Arm(const std::shared_ptr<State>& st, Clock::time_point at);
  static void Wake(const std::shared_ptr<State>& st);

  std::shared_ptr<State> st_;
};

}  // namespace geogate::gateway
