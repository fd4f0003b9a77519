#include <catch2/catch.hpp>

#include <chrono>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "health/asio_timer.h"
#include "proxy/watchdog.h"
#include "testing/simulated_time.h"

using namespace geogate::proxy;
using namespace std::chrono_literals;
using TP = WatchdogClock::time_point;

namespace {
const geogate::health::RealTimeSource kRealTime;  // for the test on real timers
constexpr TP kNever = TP::max();
TP At(int ms) {
  return TP() + std::chrono::milliseconds(ms);
}
}  // namespace

TEST_CASE("watchdog wake: expires at the deadline, sleeps until it before", "[watchdog]") {
  WatchdogWake early = OnWatchdogWake(At(100), At(250), kNever, 25ms);
  CHECK_FALSE(early.expire);
  CHECK_FALSE(early.poll);
  CHECK(early.sleep_until == At(250));  // woke for an older, earlier deadline

  WatchdogWake due = OnWatchdogWake(At(250), At(250), kNever, 25ms);
  CHECK(due.expire);
  CHECK(OnWatchdogWake(At(900), At(250), At(300), 25ms).expire);  // late wake-ups expire too
}

TEST_CASE("watchdog wake: nothing guarded leaves the timer idle", "[watchdog]") {
  WatchdogWake w = OnWatchdogWake(At(100), kNever, kNever, 25ms);
  CHECK_FALSE(w.expire);
  CHECK_FALSE(w.poll);
  CHECK(w.sleep_until == kNever);
}

TEST_CASE("watchdog wake: health polls are due once per period", "[watchdog]") {
  WatchdogWake due = OnWatchdogWake(At(125), At(1000), At(125), 25ms);
  CHECK(due.poll);
  CHECK(due.next_poll == At(150));
  CHECK(due.sleep_until == At(150));

  WatchdogWake not_yet = OnWatchdogWake(At(110), At(1000), At(125), 25ms);
  CHECK_FALSE(not_yet.poll);
  CHECK(not_yet.next_poll == At(125));
  CHECK(not_yet.sleep_until == At(125));

  // The deadline comes before the next poll: sleep until the deadline.
  WatchdogWake deadline_first = OnWatchdogWake(At(125), At(140), At(125), 25ms);
  CHECK(deadline_first.poll);
  CHECK(deadline_first.sleep_until == At(140));
}

TEST_CASE("watchdog re-arm: only for an earlier wake-up", "[watchdog]") {
  CHECK(WatchdogNeedsRearm(false, At(0), At(100)));        // not armed
  CHECK_FALSE(WatchdogNeedsRearm(true, At(50), At(100)));  // later: a store, the wake re-arms
  CHECK_FALSE(WatchdogNeedsRearm(true, At(100), At(100)));
  CHECK(WatchdogNeedsRearm(true, At(200), At(100)));  // earlier: now
  CHECK_FALSE(WatchdogNeedsRearm(false, At(0), kNever));
}

TEST_CASE("watchdog: on real timers, closes the guarded stream when its deadline passes",
          "[watchdog]") {
  boost::asio::io_context ioc;
  geogate::health::AsioTimerFactory timers(ioc);
  Stream stream{Stream::Socket(ioc)};
  stream.lowest().open(boost::asio::ip::tcp::v4());
  Watchdog wd(timers, kRealTime);
  auto t0 = WatchdogClock::now();
  wd.Guard(&stream, t0 + 1ms);
  wd.Guard(&stream, t0 + 30ms);  // moved later before the first wake
  ioc.run();
  CHECK(wd.expired());
  CHECK_FALSE(wd.abandoned());
  CHECK_FALSE(stream.lowest().is_open());
  CHECK(WatchdogClock::now() - t0 >= 30ms);  // not at the superseded deadline
}

namespace {
// An open stream guarded by a Watchdog in simulated time, and a backend it
// may poll.
struct Guarded {
  Guarded() {
    stream.lowest().open(boost::asio::ip::tcp::v4());
    backend.state = geogate::health::HealthState::kHealthy;
  }
  bool open() { return stream.lowest().is_open(); }
  geogate::health::SimulatedTime sim;
  boost::asio::io_context ioc;
  Stream stream{Stream::Socket(ioc)};
  geogate::health::BackendState backend{"b"};
  Watchdog wd{sim, sim};
};
}  // namespace

TEST_CASE("watchdog: a deadline moved later fires at the new one only", "[watchdog]") {
  Guarded f;
  auto t0 = f.sim.monotonic();
  f.wd.Guard(&f.stream, t0 + 10ms);
  f.wd.Guard(&f.stream, t0 + 30ms);  // a store: the timer wakes at 10 ms and sleeps again
  f.sim.advance(29ms);
  CHECK_FALSE(f.wd.expired());
  CHECK(f.open());
  f.sim.advance(1ms);
  CHECK(f.wd.expired());
  CHECK_FALSE(f.open());
}

TEST_CASE("watchdog: a deadline moved earlier fires at the earlier one", "[watchdog]") {
  Guarded f;
  auto t0 = f.sim.monotonic();
  f.wd.Guard(&f.stream, t0 + 1s);
  f.wd.Guard(&f.stream, t0 + 5ms);
  f.sim.advance(5ms);
  CHECK(f.wd.expired());
  CHECK_FALSE(f.open());
}

TEST_CASE("watchdog: a sub-millisecond deadline is never woken early", "[watchdog]") {
  Guarded f;
  f.wd.Guard(&f.stream, f.sim.monotonic() + std::chrono::microseconds(1500));
  f.sim.advance(1ms);
  CHECK_FALSE(f.wd.expired());
  f.sim.advance(1ms);  // rounded up to 2 ms
  CHECK(f.wd.expired());
}

TEST_CASE("watchdog: a disarmed deadline closes nothing", "[watchdog]") {
  Guarded f;
  f.wd.Guard(&f.stream, f.sim.monotonic() + 5ms);
  f.wd.Disarm();
  f.sim.advance(1s);  // the timer lapses
  CHECK_FALSE(f.wd.expired());
  CHECK(f.open());
  CHECK(f.sim.enabled_timers() == 0);
}

TEST_CASE("watchdog: an interrupting deadline keeps the stream open", "[watchdog]") {
  Guarded f;
  f.wd.Guard(&f.stream, f.sim.monotonic() + 5ms, Watchdog::OnExpiry::kInterrupt);
  f.sim.advance(5ms);
  CHECK(f.wd.expired());
  CHECK(f.open());  // cancelled, not closed: a 408 can still be written
}

TEST_CASE("watchdog: a backend leaving rotation abandons the guarded stream", "[watchdog]") {
  Guarded f;
  f.wd.PollHealth(&f.backend, 2ms, f.sim.monotonic());
  f.wd.Guard(&f.stream, f.sim.monotonic() + 10s);
  f.sim.advance(20ms);  // healthy: polls, keeps the stream
  CHECK(f.open());
  CHECK_FALSE(f.wd.abandoned());
  f.backend.state = geogate::health::HealthState::kUnhealthy;
  f.sim.advance(1ms);
  CHECK_FALSE(f.wd.abandoned());  // not before the next poll
  f.sim.advance(1ms);
  CHECK(f.wd.abandoned());
  CHECK_FALSE(f.wd.expired());
  CHECK_FALSE(f.open());
}

TEST_CASE("watchdog: each poll that finds the backend routable runs the poll hook", "[watchdog]") {
  Guarded f;
  int polls = 0;
  f.wd.PollHealth(&f.backend, 2ms, f.sim.monotonic(), [&] { ++polls; });
  f.wd.Guard(&f.stream, f.sim.monotonic() + 10s);
  CHECK(polls == 0);  // the hook waits for a poll: not called at PollHealth
  f.sim.advance(20ms);
  CHECK(polls == 10);
  f.wd.StopPolling();  // drops the hook with the backend
  f.sim.advance(10ms);
  CHECK(polls == 10);

  polls = 0;
  f.wd.PollHealth(&f.backend, 2ms, f.sim.monotonic(), [&] { ++polls; });
  f.backend.state = geogate::health::HealthState::kUnhealthy;
  f.sim.advance(2ms);  // the first poll abandons: the hook never runs
  CHECK(f.wd.abandoned());
  CHECK(polls == 0);
}
