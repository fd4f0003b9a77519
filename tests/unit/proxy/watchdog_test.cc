#include <catch2/catch.hpp>

#include <chrono>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "proxy/watchdog.h"
#include "testing/simulated_time.h"

using namespace geogate::gateway;
using namespace std::chrono_literals;
using TP = WatchdogClock::time_point;

namespace {
const geogate::health::RealTimeSource kRealTime;  // these tests wait on real timers
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

TEST_CASE("watchdog: closes the guarded stream when its deadline passes", "[watchdog]") {
  boost::asio::io_context ioc;
  Stream stream{beast::tcp_stream(ioc)};
  stream.lowest().socket().open(boost::asio::ip::tcp::v4());
  Watchdog wd(ioc, kRealTime);
  auto t0 = WatchdogClock::now();
  wd.Guard(&stream, t0 + 1ms);
  wd.Guard(&stream, t0 + 30ms);  // moved later before the first wake
  ioc.run();
  CHECK(wd.expired());
  CHECK_FALSE(wd.abandoned());
  CHECK_FALSE(stream.lowest().socket().is_open());
  CHECK(WatchdogClock::now() - t0 >= 30ms);  // not at the superseded deadline
}

TEST_CASE("watchdog: a disarmed deadline closes nothing", "[watchdog]") {
  boost::asio::io_context ioc;
  Stream stream{beast::tcp_stream(ioc)};
  stream.lowest().socket().open(boost::asio::ip::tcp::v4());
  Watchdog wd(ioc, kRealTime);
  wd.Guard(&stream, WatchdogClock::now() + 5ms);
  wd.Disarm();
  ioc.run();  // the timer lapses
  CHECK_FALSE(wd.expired());
  CHECK(stream.lowest().socket().is_open());
}

namespace {
// An open stream guarded by a Watchdog that polls a healthy backend.
struct PolledStream {
  PolledStream() {
    stream.lowest().socket().open(boost::asio::ip::tcp::v4());
    backend.state = geogate::health::HealthState::kHealthy;
  }
  boost::asio::io_context ioc;
  Stream stream{beast::tcp_stream(ioc)};
  geogate::health::BackendState backend{"b"};
  Watchdog wd{ioc, kRealTime};
};
}  // namespace

TEST_CASE("watchdog: a backend leaving rotation abandons the guarded stream", "[watchdog]") {
  PolledStream f;
  auto& [ioc, stream, backend, wd] = f;
  wd.PollHealth(&backend, 2ms);
  wd.Guard(&stream, WatchdogClock::now() + 10s);
  ioc.run_for(20ms);  // healthy: polls, keeps the stream
  CHECK(stream.lowest().socket().is_open());
  CHECK_FALSE(wd.abandoned());
  backend.state = geogate::health::HealthState::kUnhealthy;
  ioc.restart();
  ioc.run_for(2s);  // returns as soon as the poll abandoned (no work left)
  CHECK(wd.abandoned());
  CHECK_FALSE(wd.expired());
  CHECK_FALSE(stream.lowest().socket().is_open());
}

TEST_CASE("watchdog: each poll that finds the backend routable runs the poll hook", "[watchdog]") {
  PolledStream f;
  auto& [ioc, stream, backend, wd] = f;
  int polls = 0;
  wd.PollHealth(&backend, 2ms, [&] { ++polls; });
  wd.Guard(&stream, WatchdogClock::now() + 10s);
  ioc.run_for(20ms);
  CHECK(polls >= 1);  // the hook waits for a poll: not called at PollHealth
  int before_stop = polls;
  wd.StopPolling();  // drops the hook with the backend
  ioc.restart();
  ioc.run_for(10ms);
  CHECK(polls == before_stop);

  polls = 0;
  wd.PollHealth(&backend, 2ms, [&] { ++polls; });
  backend.state = geogate::health::HealthState::kUnhealthy;
  ioc.restart();
  ioc.run_for(2s);  // the first poll abandons: the hook never runs
  CHECK(wd.abandoned());
  CHECK(polls == 0);
}

TEST_CASE("watchdog: a deadline is in the injected clock's time", "[watchdog]") {
  geogate::health::SimulatedTime sim;
  boost::asio::io_context ioc;
  Stream stream{beast::tcp_stream(ioc)};
  stream.lowest().socket().open(boost::asio::ip::tcp::v4());
  Watchdog wd(ioc, sim);
  wd.Guard(&stream, sim.monotonic() + 5ms);
  // Real time passes the deadline several times over; the injected clock
  // has not moved, so every wake-up goes back to sleep.
  ioc.run_for(50ms);
  CHECK_FALSE(wd.expired());
  CHECK(stream.lowest().socket().is_open());
  sim.advance(5ms);
  ioc.restart();
  ioc.run_for(2s);  // returns at the first wake-up after the advance (no work left)
  CHECK(wd.expired());
  CHECK_FALSE(stream.lowest().socket().is_open());
}
