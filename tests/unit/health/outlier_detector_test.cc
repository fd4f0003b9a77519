#include "health/outlier_detector.h"

#include <catch2/catch.hpp>

#include "test_support.h"

using namespace geogate::health;
using namespace geogate::health::testing;
using Verdict = OutlierDetector::Verdict;

namespace {

int64_t Ns(Millis d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// A detector over hand-made healthy states, with hooks recorded.
struct DetectorRig {
  explicit DetectorRig(std::shared_ptr<geogate::config::Snapshot> s) : snapshot(std::move(s)) {
    states = table.Bind(*snapshot);
    for (auto& st : states)
      st->state.store(HealthState::kHealthy);
    detector.update(*snapshot, states);
  }
  Verdict fail(size_t i, FailureReason r = FailureReason::kUpstream5xx) {
    return detector.ReportFailure(*states[i], r);
  }
  // Fails backend i until the detector decides something other than kCounted.
  Verdict failUntilDecided(size_t i) {
    for (int n = 0; n < 100; ++n) {
      Verdict v = fail(i);
      if (v != Verdict::kCounted) return v;
    }
    return Verdict::kCounted;
  }
  Millis ejectedFor(size_t i) const {
    return std::chrono::duration_cast<Millis>(
        std::chrono::nanoseconds(states[i]->ejected_until_ns.load() - ToNanos(time.monotonic())));
  }
  // A good probe that started now.
  bool probeOk(size_t i) { return detector.OnProbeSuccess(*states[i], time.monotonic()); }

  SimulatedTime time;
  std::vector<std::pair<BackendState*, FailureReason>> marked;
  std::vector<StateChange> changes;
  OutlierDetector detector{
      time, OutlierDetector::Hooks{
                [this](BackendState& s, FailureReason r) { marked.emplace_back(&s, r); },
                [this](const BackendState&, const StateChange& c) { changes.push_back(c); }}};
  std::shared_ptr<geogate::config::Snapshot> snapshot;
  HealthTable table;
  std::vector<BackendStatePtr> states;
};

std::shared_ptr<geogate::config::Snapshot> Pool(size_t per_region, size_t regions = 1) {
  std::vector<geogate::config::Backend> backends;
  for (size_t r = 0; r < regions; ++r)
    for (size_t i = 0; i < per_region; ++i)
      backends.push_back(
          MakeBackend("r" + std::to_string(r) + "b" + std::to_string(i), r, static_cast<int>(i)));
  return MakeSnapshot(backends);
}

}  // namespace

TEST_CASE("outlier: consecutive failures eject at the threshold", "[health][outlier]") {
  DetectorRig rig(Pool(4));
  BackendState& s = *rig.states[0];
  CHECK(rig.fail(0) == Verdict::kCounted);
  CHECK(rig.fail(0, FailureReason::kFirstTokenTimeout) == Verdict::kCounted);
  CHECK(s.consecutive_failures.load() == 2);
  CHECK(s.routable(ToNanos(rig.time.monotonic())));
  CHECK(rig.fail(0, FailureReason::kStreamIdle) == Verdict::kEjected);

  CHECK(s.ejected());
  CHECK_FALSE(s.routable(ToNanos(rig.time.monotonic())));
  CHECK(rig.ejectedFor(0) == Millis(5000));
  CHECK(s.ejections.load() == 1);
  CHECK(s.reason.load() == FailureReason::kEjected);
  CHECK(s.consecutive_failures.load() == 0);
  CHECK(s.state.load() == HealthState::kHealthy);  // the probes' verdict is untouched
  REQUIRE(rig.changes.size() == 1);
  CHECK(rig.changes[0].ejected);
  CHECK(rig.changes[0].to == HealthState::kUnhealthy);
  CHECK(rig.changes[0].reason == FailureReason::kStreamIdle);
  CHECK(rig.detector.EjectedInRegion(0) == 1);
  // Further reports about an ejected backend change nothing.
  CHECK(rig.fail(0) == Verdict::kIgnored);
}

TEST_CASE("outlier: a success resets the count", "[health][outlier]") {
  DetectorRig rig(Pool(4));
  rig.fail(0);
  rig.fail(0);
  HealthService::ReportSuccess(*rig.states[0]);
  CHECK(rig.states[0]->consecutive_failures.load() == 0);
  CHECK(rig.fail(0) == Verdict::kCounted);
  CHECK(rig.fail(0) == Verdict::kCounted);
  CHECK(rig.fail(0) == Verdict::kEjected);
}

TEST_CASE("outlier: connection refused marks unhealthy at once", "[health][outlier]") {
  DetectorRig rig(Pool(4));
  rig.fail(0);
  CHECK(rig.fail(0, FailureReason::kConnectRefused) == Verdict::kMarkedUnhealthy);
  REQUIRE(rig.marked.size() == 1);
  CHECK(rig.marked[0].first == rig.states[0].get());
  CHECK(rig.marked[0].second == FailureReason::kConnectRefused);
  CHECK(rig.states[0]->consecutive_failures.load() == 0);
  CHECK_FALSE(rig.states[0]->ejected());  // not an ejection: not subject to the pool cap
}

TEST_CASE("outlier: unknown or unhealthy or meaningless reports are ignored", "[health][outlier]") {
  DetectorRig rig(Pool(2));
  BackendState stranger("x");
  CHECK(rig.detector.ReportFailure(stranger, FailureReason::kUpstream5xx) == Verdict::kIgnored);
  CHECK(rig.fail(0, FailureReason::kNone) == Verdict::kIgnored);
  rig.states[1]->state.store(HealthState::kUnhealthy);
  CHECK(rig.fail(1) == Verdict::kIgnored);
  CHECK(rig.states[1]->consecutive_failures.load() == 0);
}

TEST_CASE("outlier: ejection time grows with each ejection up to the cap", "[health][outlier]") {
  auto snap = Pool(4);
  snap->health.outlier_base_ejection = Millis(5000);
  snap->health.outlier_max_ejection = Millis(12000);
  DetectorRig rig(snap);
  std::vector<Millis> durations;
  for (int round = 0; round < 4; ++round) {
    REQUIRE(rig.failUntilDecided(0) == Verdict::kEjected);
    durations.push_back(rig.ejectedFor(0));
    rig.time.advance(durations.back());
    REQUIRE(rig.probeOk(0));
    rig.time.advance(Millis(1000));  // back in rotation briefly, then fails again
  }
  CHECK(durations ==
        std::vector<Millis>{Millis(5000), Millis(10000), Millis(12000), Millis(12000)});
  CHECK(rig.states[0]->ejections.load() == 4);
}

TEST_CASE("outlier: the streak starts over after max_ejection in rotation", "[health][outlier]") {
  auto snap = Pool(4);
  snap->health.outlier_max_ejection = Millis(60000);
  DetectorRig rig(snap);
  REQUIRE(rig.failUntilDecided(0) == Verdict::kEjected);
  rig.time.advance(Millis(5000));
  REQUIRE(rig.probeOk(0));
  rig.time.advance(Millis(10000));
  REQUIRE(rig.failUntilDecided(0) == Verdict::kEjected);
  CHECK(rig.ejectedFor(0) == Millis(10000));  // flapping: backs off
  rig.time.advance(Millis(10000));
  REQUIRE(rig.probeOk(0));
  rig.time.advance(Millis(60000));  // a full max_ejection of good behaviour
  REQUIRE(rig.failUntilDecided(0) == Verdict::kEjected);
  CHECK(rig.ejectedFor(0) == Millis(5000));
  CHECK(rig.detector.streak(*rig.states[0]) == 1);
}

TEST_CASE("outlier: returns only after a good probe started past the expiry", "[health][outlier]") {
  DetectorRig rig(Pool(4));
  BackendState& s = *rig.states[0];
  REQUIRE(rig.failUntilDecided(0) == Verdict::kEjected);
  const int64_t until = s.ejected_until_ns.load();

  // A good probe during the ejection does not end it.
  rig.time.advance(Millis(4000));
  CHECK_FALSE(rig.probeOk(0));
  // The expiry alone does not end it either.
  rig.time.advance(Millis(2000));
  CHECK(s.ejected());
  CHECK_FALSE(s.routable(ToNanos(rig.time.monotonic())));
  // A probe that started before the expiry and answered after does not count.
  CHECK_FALSE(rig.detector.OnProbeSuccess(s, FromNanos(until - 1)));
  // One started at the expiry does.
  rig.changes.clear();
  CHECK(rig.detector.OnProbeSuccess(s, FromNanos(until)));
  CHECK_FALSE(s.ejected());
  CHECK(s.routable(ToNanos(rig.time.monotonic())));
  CHECK(s.reason.load() == FailureReason::kNone);
  REQUIRE(rig.changes.size() == 1);
  CHECK(rig.changes[0].ejected);
  CHECK(rig.changes[0].to == HealthState::kHealthy);
  CHECK(rig.detector.EjectedInRegion(0) == 0);
}

TEST_CASE("outlier: never more than max_ejection_percent of a pool", "[health][outlier]") {
  SECTION("4 backends at 50 %: two ejected, the third stays") {
    DetectorRig rig(Pool(4, 2));  // regions 0 and 1, four backends each
    REQUIRE(rig.failUntilDecided(0) == Verdict::kEjected);
    REQUIRE(rig.failUntilDecided(1) == Verdict::kEjected);
    CHECK(rig.failUntilDecided(2) == Verdict::kCapped);
    CHECK_FALSE(rig.states[2]->ejected());
    // The failure was counted: it keeps counting and is checked again.
    CHECK(rig.states[2]->consecutive_failures.load() == 3);
    CHECK(rig.fail(2) == Verdict::kCapped);
    CHECK(rig.states[2]->consecutive_failures.load() == 4);
    CHECK(rig.detector.EjectedInRegion(0) == 2);
    // Another region is another pool.
    CHECK(rig.failUntilDecided(4) == Verdict::kEjected);
    CHECK(rig.failUntilDecided(5) == Verdict::kEjected);
    // When one returns, the next failure of the capped one ejects it.
    rig.time.advance(Millis(5000));
    REQUIRE(rig.probeOk(0));
    CHECK(rig.fail(2) == Verdict::kEjected);
  }
  SECTION("a pool is one region serving one model") {
    // Region 0: a0, a1 serve model A; b0, b1 serve B; x serves both.
    auto mk = [](const std::string& name, int i, std::vector<std::string> models) {
      auto b = MakeBackend(name, 0, i);
      b.models = std::move(models);
      return b;
    };
    auto snap = MakeSnapshot({mk("a0", 1, {"A"}), mk("a1", 2, {"A"}), mk("b0", 3, {"B"}),
                              mk("b1", 4, {"B"}), mk("x", 5, {"A", "B"})});
    DetectorRig rig(snap);
    CHECK(rig.failUntilDecided(0) == Verdict::kEjected);  // A: 1 of 3 out
    CHECK(rig.failUntilDecided(1) == Verdict::kCapped);   // A: 2 of 3 would pass 50 %
    CHECK(rig.failUntilDecided(2) == Verdict::kEjected);  // B: 1 of 3 out
    CHECK(rig.failUntilDecided(4) == Verdict::kCapped);   // fits neither A nor B
    CHECK(rig.detector.EjectedInRegion(0) == 2);
  }
  SECTION("a region of one backend is never ejected at 50 %") {
    DetectorRig rig(Pool(1));
    CHECK(rig.failUntilDecided(0) == Verdict::kCapped);
  }
  SECTION("100 % allows the whole region") {
    auto snap = Pool(2);
    snap->health.max_ejection_percent = 100;
    DetectorRig rig(snap);
    CHECK(rig.failUntilDecided(0) == Verdict::kEjected);
    CHECK(rig.failUntilDecided(1) == Verdict::kEjected);
  }
  SECTION("outlier_consecutive_failures = 0 disables ejection") {
    auto snap = Pool(4);
    snap->health.outlier_consecutive_failures = 0;
    DetectorRig rig(snap);
    for (int i = 0; i < 10; ++i)
      CHECK(rig.fail(0) == Verdict::kCounted);
  }
}

TEST_CASE("outlier: a reload keeps streaks and forgets removed backends", "[health][outlier]") {
  DetectorRig rig(Pool(4));
  REQUIRE(rig.failUntilDecided(0) == Verdict::kEjected);
  BackendStatePtr kept = rig.states[0];
  // Reload without backend 3; backend 0 unchanged.
  auto snap = Pool(3);
  auto states = rig.table.Bind(*snap);
  REQUIRE(states[0] == kept);
  rig.detector.update(*snap, states);
  CHECK(rig.detector.streak(*kept) == 1);
  CHECK(rig.detector.EjectedInRegion(0) == 1);
  CHECK(rig.detector.ReportFailure(*rig.states[3], FailureReason::kUpstream5xx) ==
        Verdict::kIgnored);
}

// End to end on the health thread's objects: the detector wired to a real
// HealthChecker over simulated time, as HealthService wires them.
TEST_CASE("outlier with checker: refused is out at once and ejected returns at expiry",
          "[health][outlier][checker]") {
  CheckerRig rig;
  OutlierDetector detector(rig.time, OutlierDetector::Hooks{[&](BackendState& s, FailureReason r) {
                                                              rig.checker.MarkUnhealthy(s, r);
                                                            },
                                                            nullptr});
  rig.extra_on_probe = [&](BackendState& s, const ProbeResult& r, MonotonicTime started) {
    if (r.ok) detector.OnProbeSuccess(s, started);
  };
  rig.load(MakeSnapshot({MakeBackend("a", 0), MakeBackend("b", 0, 2)}));
  detector.update(*rig.snapshot, rig.states);
  REQUIRE(rig.time.AdvanceUntil([&] { return rig.state(0).routable(rig.nowNs()); }, Millis(200)));

  SECTION("connection refused") {
    CHECK(detector.ReportFailure(rig.state(0), FailureReason::kConnectRefused) ==
          Verdict::kMarkedUnhealthy);
    CHECK(rig.state(0).state.load() == HealthState::kUnhealthy);
    CHECK(rig.state(0).reason.load() == FailureReason::kConnectRefused);
    rig.probes.clear();
    REQUIRE(
        rig.time.AdvanceUntil([&] { return rig.state(0).routable(rig.nowNs()); }, Millis(1000)));
    CHECK(rig.probes.size() >= 2);  // healthy_threshold = 2 fresh probes
  }
  SECTION("ejection") {
    for (int i = 0; i < 3; ++i)
      detector.ReportFailure(rig.state(0), FailureReason::kUpstream5xx);
    REQUIRE(rig.state(0).ejected());
    const int64_t until = rig.state(0).ejected_until_ns.load();
    // Probes keep succeeding; still out until the expiry.
    rig.time.advance(Millis(4990));
    CHECK_FALSE(rig.state(0).routable(rig.nowNs()));
    // A probe is aimed at the expiry: back right then.
    REQUIRE(rig.time.AdvanceUntil([&] { return rig.state(0).routable(rig.nowNs()); }, Millis(200)));
    CHECK(rig.nowNs() >= until);
    CHECK(rig.nowNs() - until <= Ns(Millis(10)));
    CHECK(rig.state(0).state.load() == HealthState::kHealthy);
  }
}
