#include "health/health_checker.h"

#include <algorithm>

#include <catch2/catch.hpp>

#include "test_support.h"

using namespace geogate::health;
using namespace geogate::health::testing;
using Mode = FakeBackend::Mode;

namespace {

Millis Since(MonotonicTime t0, MonotonicTime t) {
  return std::chrono::duration_cast<Millis>(t - t0);
}

// Brings backend 0 of a one-backend rig to kHealthy.
void MakeHealthy(CheckerRig& rig) {
  REQUIRE(rig.time.AdvanceUntil([&] { return rig.state(0).state.load() == HealthState::kHealthy; },
                                Millis(1000)));
}

}  // namespace

TEST_CASE("checker: a new backend takes traffic after its first good probe", "[health][checker]") {
  CheckerRig rig;
  rig.load(MakeSnapshot({MakeBackend("a", 0)}));
  REQUIRE(rig.checker.size() == 1);
  CHECK(rig.state(0).state.load() == HealthState::kUnknown);
  CHECK_FALSE(rig.state(0).routable(rig.nowNs()));
  // First probe within [0, interval) plus the 5 ms answer.
  const auto t0 = rig.time.monotonic();
  MakeHealthy(rig);
  CHECK(Since(t0, rig.time.monotonic()) <= Millis(105));
  CHECK(rig.fake("a").probe_starts.size() == 1);
  CHECK(rig.state(0).routable(rig.nowNs()));
  CHECK(rig.state(0).reason.load() == FailureReason::kNone);
  CHECK(rig.state(0).since_ns.load() == rig.nowNs());
  REQUIRE(rig.changes.size() == 1);
  CHECK(rig.changes[0].backend == "a");
  CHECK(rig.changes[0].from == HealthState::kUnknown);
  CHECK(rig.changes[0].to == HealthState::kHealthy);
  CHECK_FALSE(rig.changes[0].ejected);
}

TEST_CASE("checker: a new backend failing its first probe is unhealthy", "[health][checker]") {
  CheckerRig rig;
  rig.fake("a").mode = Mode::kFail;
  rig.fake("a").reason = FailureReason::kBadStatus;
  rig.load(MakeSnapshot({MakeBackend("a", 0)}));
  REQUIRE(rig.time.AdvanceUntil([&] { return rig.state(0).state.load() != HealthState::kUnknown; },
                                Millis(200)));
  CHECK(rig.state(0).state.load() == HealthState::kUnhealthy);
  CHECK(rig.state(0).reason.load() == FailureReason::kBadStatus);
  CHECK(rig.state(0).probe_failures.load() == 1);
}

TEST_CASE("checker: a stalled backend is out in under a second with defaults",
          "[health][checker][failover]") {
  // Defaults: interval 100 ms (+-10 %), timeout 200 ms, unhealthy_threshold 2,
  // changing_interval 50 ms. Worst case: 110 + 200 + 55 + 200 = 565 ms after
  // the last answer. Try many seeds and stall moments.
  Millis worst(0);
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CheckerRig rig(seed);
    rig.load(MakeSnapshot({MakeBackend("a", 0)}));
    MakeHealthy(rig);
    rig.time.advance(Millis(seed * 7 % 100));  // stall at a different phase each time
    rig.fake("a").mode = Mode::kStall;
    const auto stalled_at = rig.time.monotonic();
    REQUIRE(rig.time.AdvanceUntil(
        [&] { return rig.state(0).state.load() == HealthState::kUnhealthy; }, Millis(5000)));
    const Millis took = Since(stalled_at, rig.time.monotonic());
    worst = std::max(worst, took);
    CHECK(took < Millis(1000));
    CHECK(took <= Millis(565));
    CHECK(rig.state(0).reason.load() == FailureReason::kProbeTimeout);
    CHECK(rig.state(0).probe_failures.load() == 2);
    CHECK_FALSE(rig.state(0).routable(rig.nowNs()));
    CHECK(rig.fake("a").cancels >= 2);  // each timed-out probe was abandoned
  }
  INFO("worst time to out: " << worst.count() << " ms");
  CHECK(worst > Millis(300));  // sanity: it did take two timeouts
}

TEST_CASE("checker: a recovered backend returns after healthy_threshold good probes",
          "[health][checker][failover]") {
  CheckerRig rig(3);
  auto snap = MakeSnapshot({MakeBackend("a", 0)});
  snap->health.healthy_threshold = 3;
  rig.load(snap);
  MakeHealthy(rig);
  rig.fake("a").mode = Mode::kStall;
  REQUIRE(rig.time.AdvanceUntil(
      [&] { return rig.state(0).state.load() == HealthState::kUnhealthy; }, Millis(1000)));

  // Recover (the probe in flight stays stalled and times out).
  rig.probes.clear();
  rig.changes.clear();
  rig.fake("a").mode = Mode::kOk;
  REQUIRE(rig.time.AdvanceUntil([&] { return rig.state(0).state.load() == HealthState::kHealthy; },
                                Millis(2000)));
  const auto good = std::count_if(rig.probes.begin(), rig.probes.end(),
                                  [](const auto& p) { return p.second.ok; });
  CHECK(good == 3);
  REQUIRE(rig.changes.size() == 1);
  CHECK(rig.changes[0].from == HealthState::kUnhealthy);
  CHECK(rig.changes[0].to == HealthState::kHealthy);
  CHECK(rig.state(0).reason.load() == FailureReason::kNone);
  CHECK(rig.state(0).probe_failures.load() == 0);
}

TEST_CASE("checker: probes faster while a change is pending or unhealthy", "[health][checker]") {
  CheckerRig rig(5);
  auto snap = MakeSnapshot({MakeBackend("a", 0)});
  snap->health.unhealthy_threshold = 3;
  rig.load(snap);
  FakeBackend& fake = rig.fake("a");
  fake.delay = Millis(0);  // answers at once: gaps are the waits themselves
  MakeHealthy(rig);
  rig.time.advance(Millis(1000));

  auto gaps = [&](size_t from) {
    std::vector<Millis> out;
    for (size_t i = from + 1; i < fake.probe_starts.size(); ++i)
      out.push_back(Since(fake.probe_starts[i - 1], fake.probe_starts[i]));
    return out;
  };
  for (Millis g : gaps(0)) {
    CHECK(g >= Millis(90));
    CHECK(g <= Millis(110));
  }
  // Failing: pending (1st and 2nd failure) and then unhealthy, all at the
  // changing interval, 50 ms +-10 %.
  fake.mode = Mode::kFail;
  const size_t mark = fake.probe_starts.size() - 1;
  rig.time.advance(Millis(1000));
  CHECK(rig.state(0).state.load() == HealthState::kUnhealthy);
  const auto fast = gaps(mark);
  REQUIRE(fast.size() >= 15);
  // The first gap was armed before the first failure: normal interval.
  for (size_t i = 1; i < fast.size(); ++i) {
    CHECK(fast[i] >= Millis(45));
    CHECK(fast[i] <= Millis(55));
  }
  // Back to healthy: back to the normal interval.
  fake.mode = Mode::kOk;
  rig.time.advance(Millis(200));
  REQUIRE(rig.state(0).state.load() == HealthState::kHealthy);
  const size_t mark2 = fake.probe_starts.size() - 1;
  rig.time.advance(Millis(1000));
  for (Millis g : gaps(mark2)) {
    CHECK(g >= Millis(90));
    CHECK(g <= Millis(110));
  }
}

TEST_CASE("checker: probe RTT is an EWMA with routing.ewma_alpha", "[health][checker]") {
  CheckerRig rig;
  auto snap = MakeSnapshot({MakeBackend("a", 0)});
  snap->routing.ewma_alpha = 0.5;
  rig.load(snap);
  FakeBackend& fake = rig.fake("a");
  fake.rtt = std::chrono::microseconds(10000);
  MakeHealthy(rig);
  CHECK(rig.state(0).rtt_ewma_us.load() == 10000);
  fake.rtt = std::chrono::microseconds(20000);
  const size_t n = fake.probe_starts.size();
  REQUIRE(rig.time.AdvanceUntil([&] { return rig.probes.size() == n + 1; }, Millis(200)));
  CHECK(rig.state(0).rtt_ewma_us.load() == 15000);
  REQUIRE(rig.time.AdvanceUntil([&] { return rig.probes.size() == n + 2; }, Millis(200)));
  CHECK(rig.state(0).rtt_ewma_us.load() == 17500);
}

TEST_CASE("checker: a return to healthy restarts RTT and TTFT estimates", "[health][checker]") {
  CheckerRig rig;
  auto snap = MakeSnapshot({MakeBackend("a", 0)});
  snap->health.healthy_threshold = 1;
  rig.load(snap);
  FakeBackend& fake = rig.fake("a");
  fake.rtt = std::chrono::microseconds(900000);  // slow before the outage
  MakeHealthy(rig);
  rig.state(0).ttft_ewma_us.store(5'000'000);  // a worker's slow sample
  fake.mode = Mode::kFail;
  REQUIRE(rig.time.AdvanceUntil(
      [&] { return rig.state(0).state.load() == HealthState::kUnhealthy; }, Millis(1000)));
  fake.mode = Mode::kOk;
  fake.rtt = std::chrono::microseconds(2000);
  REQUIRE(rig.time.AdvanceUntil([&] { return rig.state(0).state.load() == HealthState::kHealthy; },
                                Millis(1000)));
  CHECK(rig.state(0).rtt_ewma_us.load() == 2000);
  CHECK(rig.state(0).ttft_ewma_us.load() == -1);
}

TEST_CASE("checker: a reported load is stored with its time", "[health][checker]") {
  CheckerRig rig;
  rig.load(MakeSnapshot({MakeBackend("a", 0)}));
  LoadReport load;
  load.queue_depth = 7;
  load.inflight = 12;
  load.kv_cache_utilization = 0.25f;
  rig.fake("a").load = load;
  MakeHealthy(rig);
  const LoadReport got = rig.state(0).load();
  CHECK(got.queue_depth == 7);
  CHECK(got.inflight == 12);
  CHECK(got.kv_cache_utilization == Approx(0.25));
  CHECK(got.at_ns == rig.nowNs());
}

TEST_CASE("checker: a refused probe takes a healthy backend out at once", "[health][checker]") {
  CheckerRig rig;
  rig.load(MakeSnapshot({MakeBackend("a", 0)}));
  MakeHealthy(rig);
  rig.fake("a").mode = Mode::kFail;
  rig.fake("a").reason = FailureReason::kConnectRefused;
  rig.probes.clear();
  REQUIRE(rig.time.AdvanceUntil(
      [&] { return rig.state(0).state.load() == HealthState::kUnhealthy; }, Millis(1000)));
  CHECK(rig.probes.size() == 1);  // not unhealthy_threshold (2) probes
  CHECK(rig.state(0).reason.load() == FailureReason::kConnectRefused);
}

TEST_CASE("checker: the timeout reason comes from the client", "[health][checker]") {
  CheckerRig rig;
  rig.fake("a").mode = Mode::kStall;
  rig.fake("a").timeout_reason = FailureReason::kConnectTimeout;
  rig.load(MakeSnapshot({MakeBackend("a", 0)}));
  REQUIRE(rig.time.AdvanceUntil(
      [&] { return rig.state(0).state.load() == HealthState::kUnhealthy; }, Millis(400)));
  CHECK(rig.state(0).reason.load() == FailureReason::kConnectTimeout);
}

TEST_CASE("checker: first probes are spread over the interval", "[health][checker]") {
  CheckerRig rig(11);
  std::vector<geogate::config::Backend> backends;
  for (int i = 0; i < 50; ++i)
    backends.push_back(MakeBackend("b" + std::to_string(i), 0, i));
  const auto t0 = rig.time.monotonic();
  rig.load(MakeSnapshot(backends));
  rig.time.advance(Millis(100));
  Millis lo(1000), hi(0);
  for (auto& [name, fake] : rig.clients.backends) {
    REQUIRE(fake.probe_starts.size() == 1);
    lo = std::min(lo, Since(t0, fake.probe_starts[0]));
    hi = std::max(hi, Since(t0, fake.probe_starts[0]));
  }
  CHECK(lo < Millis(20));
  CHECK(hi >= Millis(80));
}

TEST_CASE("checker: MarkUnhealthy is immediate and the way back is healthy_threshold probes",
          "[health][checker]") {
  CheckerRig rig;
  rig.load(MakeSnapshot({MakeBackend("a", 0)}));
  MakeHealthy(rig);
  rig.changes.clear();
  REQUIRE(rig.checker.MarkUnhealthy(rig.state(0), FailureReason::kConnectRefused));
  CHECK(rig.state(0).state.load() == HealthState::kUnhealthy);
  CHECK(rig.state(0).reason.load() == FailureReason::kConnectRefused);
  CHECK(rig.state(0).since_ns.load() == rig.nowNs());
  REQUIRE(rig.changes.size() == 1);
  CHECK(rig.changes[0].reason == FailureReason::kConnectRefused);

  rig.probes.clear();
  const auto t0 = rig.time.monotonic();
  REQUIRE(rig.time.AdvanceUntil([&] { return rig.state(0).state.load() == HealthState::kHealthy; },
                                Millis(1000)));
  CHECK(rig.probes.size() == 2);
  // Two probes at the changing interval: well under 200 ms.
  CHECK(Since(t0, rig.time.monotonic()) <= Millis(2 * 55 + 2 * 5));

  BackendState stranger("nobody");
  CHECK_FALSE(rig.checker.MarkUnhealthy(stranger, FailureReason::kConnectRefused));
}

TEST_CASE("checker: update adds and keeps and removes sessions by state key", "[health][checker]") {
  CheckerRig rig;
  rig.load(MakeSnapshot({MakeBackend("a", 0), MakeBackend("b", 0, 2)}));
  rig.time.advance(Millis(200));
  BackendStatePtr a = rig.states[0];
  BackendStatePtr b = rig.states[1];
  REQUIRE(a->state.load() == HealthState::kHealthy);
  REQUIRE(b->state.load() == HealthState::kHealthy);

  // Reload: "a" unchanged with new thresholds, "b" gone, "c" new.
  auto snap = MakeSnapshot({MakeBackend("a", 0), MakeBackend("c", 1)});
  snap->health.unhealthy_threshold = 5;
  rig.load(snap);
  CHECK(rig.checker.size() == 2);
  CHECK(rig.states[0] == a);
  CHECK(a->state.load() == HealthState::kHealthy);  // not reset by the reload
  CHECK(rig.checker.find(a->key())->tracker().unhealthy_threshold() == 5);
  CHECK(rig.checker.find(b->key()) == nullptr);
  CHECK(rig.states[1]->state.load() == HealthState::kUnknown);

  // The removed backend is probed no more.
  const size_t b_probes = rig.fake("b").probe_starts.size();
  rig.time.advance(Millis(500));
  CHECK(rig.fake("b").probe_starts.size() == b_probes);
  CHECK(rig.states[1]->state.load() == HealthState::kHealthy);

  // The new thresholds apply: 4 failures leave "a" healthy, the 5th does not.
  rig.fake("a").mode = Mode::kFail;
  rig.fake("a").delay = Millis(0);
  rig.probes.clear();
  auto probes_of_a = [&] {
    return std::count_if(rig.probes.begin(), rig.probes.end(),
                         [&](const auto& p) { return p.first == a->key(); });
  };
  REQUIRE(rig.time.AdvanceUntil([&] { return probes_of_a() >= 4; }, Millis(1000)));
  CHECK(a->state.load() == HealthState::kHealthy);
  REQUIRE(rig.time.AdvanceUntil([&] { return probes_of_a() >= 5; }, Millis(1000)));
  CHECK(a->state.load() == HealthState::kUnhealthy);
}

TEST_CASE("checker: a changed URL is a new backend with fresh health", "[health][checker]") {
  CheckerRig rig;
  rig.load(MakeSnapshot({MakeBackend("a", 0)}));
  MakeHealthy(rig);
  BackendStatePtr old = rig.states[0];
  rig.load(MakeSnapshot({MakeBackend("a", 0, 9)}));
  CHECK(rig.states[0] != old);
  CHECK(rig.states[0]->state.load() == HealthState::kUnknown);
  CHECK(rig.checker.size() == 1);
  CHECK(rig.checker.find(old->key()) == nullptr);
}

TEST_CASE("checker: stop ends every session", "[health][checker]") {
  CheckerRig rig;
  rig.load(MakeSnapshot({MakeBackend("a", 0)}));
  rig.time.advance(Millis(50));
  rig.checker.stop();
  CHECK(rig.checker.size() == 0);
  CHECK(rig.time.enabled_timers() == 0);
}
