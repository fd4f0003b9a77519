// The expected-TTFT score: prior, samples, decay, recovery and queue.
#include <catch2/catch.hpp>

#include "decide_test_util.h"
#include "routing/live_health_view.h"
#include "routing/ttft_estimate.h"

namespace geogate::routing {
namespace {

using testing::Healthy;
using testing::SnapshotBuilder;

config::Snapshot OneBackend(uint32_t capacity = 10) {
  SnapshotBuilder sb;
  sb.Region("dublin", 53.35, -6.26).Model("m");
  sb.Backend("b", "dublin", config::Tier::kOnDemand, capacity);
  return sb.Build();
}

TEST_CASE("great-circle distance matches known city pairs", "[routing][estimate]") {
  config::GeoPoint frankfurt{50.11, 8.68}, dublin{53.35, -6.26}, singapore{1.35, 103.82};
  CHECK(HaversineKm(frankfurt, dublin) == Approx(1090).margin(15));
  CHECK(HaversineKm(frankfurt, singapore) == Approx(10260).margin(60));
  CHECK(HaversineKm(frankfurt, frankfurt) == Approx(0).margin(1e-9));
}

TEST_CASE("before any sample the estimate is fibre distance plus prior_ttft_ms",
          "[routing][estimate]") {
  config::Snapshot snap = OneBackend();
  BackendObservation o = Healthy(/*rtt_ms=*/-1);
  TtftEstimate e = EstimateTtft(snap, 0, o);
  double km = HaversineKm(snap.gateway.location, snap.regions[0].location);
  CHECK(e.rtt_is_prior);
  CHECK(e.service_is_prior);
  CHECK(e.rtt_ms == Approx(km / 100));
  CHECK(e.service_ms == Approx(50));
  CHECK(e.queue_ms == 0);
  CHECK(ExpectedTtftMs(snap, 0, o) == Approx(km / 100 + 50));
}

TEST_CASE("a probe RTT replaces the distance prior", "[routing][estimate]") {
  config::Snapshot snap = OneBackend();
  TtftEstimate e = EstimateTtft(snap, 0, Healthy(/*rtt_ms=*/7));
  CHECK_FALSE(e.rtt_is_prior);
  CHECK(e.total_ms() == Approx(7 + 50));
}

TEST_CASE("the observed TTFT already holds one round trip which is counted once",
          "[routing][estimate]") {
  config::Snapshot snap = OneBackend();
  TtftEstimate e = EstimateTtft(snap, 0, Healthy(/*rtt_ms=*/30, /*ttft_ms=*/70));
  CHECK(e.rtt_ms == Approx(30));
  CHECK(e.service_ms == Approx(40));
  CHECK(e.total_ms() == Approx(70));
  // A sample faster than the probe RTT (noise) leaves no negative service time.
  CHECK(EstimateTtft(snap, 0, Healthy(30, 25)).service_ms == 0);
}

TEST_CASE("a stale TTFT sample slides linearly back to the prior", "[routing][estimate]") {
  config::Snapshot snap = OneBackend();
  snap.routing.sample_stale = config::Millis(10'000);
  BackendObservation o = Healthy(10, /*ttft_ms=*/410);  // service 400
  o.since_healthy_ms = 1e9;
  auto service_at = [&](double age_ms) {
    o.ttft_age_ms = age_ms;
    return EstimateTtft(snap, 0, o).service_ms;
  };
  CHECK(service_at(0) == Approx(400));
  CHECK(service_at(10'000) == Approx(400));
  CHECK(service_at(15'000) == Approx(225));  // halfway between 400 and 50
  CHECK(service_at(20'000) == Approx(50));
  CHECK(service_at(1e7) == Approx(50));
  // Monotone all the way: no age makes it jump away from the prior.
  double prev = service_at(0);
  for (double age = 0; age <= 25'000; age += 250) {
    double s = service_at(age);
    CHECK(s <= prev + 1e-9);
    prev = s;
  }
}

TEST_CASE("a fast stale sample also returns to the prior", "[routing][estimate]") {
  config::Snapshot snap = OneBackend();
  BackendObservation o = Healthy(10, /*ttft_ms=*/15);  // service 5
  o.since_healthy_ms = 1e9;
  o.ttft_age_ms = 2.0 * static_cast<double>(snap.routing.sample_stale.count());
  CHECK(EstimateTtft(snap, 0, o).service_ms == Approx(50));
}

TEST_CASE("recovery restarts the estimate from the probe RTT", "[routing][estimate][recovery]") {
  config::Snapshot snap = OneBackend();
  // Before the outage: a slow sample and an RTT measured while it struggled.
  BackendObservation before = Healthy(/*rtt_ms=*/80, /*ttft_ms=*/2'000);
  CHECK(ExpectedTtftMs(snap, 0, before) == Approx(2'000));

  SECTION("the health module resets both EWMAs on return") {
    BackendObservation back = Healthy(/*rtt_ms=*/6, /*ttft_ms=*/-1);
    back.since_healthy_ms = 120;
    CHECK(ExpectedTtftMs(snap, 0, back) == Approx(6 + 50));
  }
  SECTION("a sample older than the healthy period is ignored") {
    // A request that began before the outage reported after the reset.
    BackendObservation back = Healthy(/*rtt_ms=*/6, /*ttft_ms=*/2'000);
    back.since_healthy_ms = 120;
    back.ttft_age_ms = 500;
    CHECK(ExpectedTtftMs(snap, 0, back) == Approx(6 + 50));
    back.ttft_age_ms = 100;  // taken after the return: it counts
    CHECK(ExpectedTtftMs(snap, 0, back) == Approx(2'000));
  }
}

TEST_CASE("no queue below the headroom knee", "[routing][estimate][queue]") {
  config::Snapshot snap = OneBackend(/*capacity=*/10);
  for (uint32_t inflight = 0; inflight <= 8; ++inflight) {
    TtftEstimate e = EstimateTtft(snap, 0, Healthy(5, 45, inflight));
    CHECK(e.queue_ms == 0);
    CHECK(e.utilization == Approx(inflight / 10.0));
  }
  // 90 %: half a request expected ahead of ours, at two service times each.
  CHECK(EstimateTtft(snap, 0, Healthy(5, 45, 9)).queue_ms == Approx(0.5 * 2 * 40));
  // Full (the selector skips it, but the reason shows the estimate): one.
  CHECK(EstimateTtft(snap, 0, Healthy(5, 45, 10)).queue_ms == Approx(2 * 40));
}

TEST_CASE("the queue estimate never falls as load rises", "[routing][estimate][queue]") {
  config::Snapshot snap = OneBackend(/*capacity=*/16);
  double prev = 0;
  for (uint32_t inflight = 0; inflight <= 40; ++inflight) {
    double q = EstimateTtft(snap, 0, Healthy(5, 45, inflight)).queue_ms;
    CHECK(q >= prev);
    prev = q;
  }
  BackendObservation o = Healthy(5, 45);
  o.load.at_ns = 1;
  o.load.inflight = 16;
  prev = 0;
  for (int32_t queued = 0; queued <= 20; ++queued) {
    o.load.queue_depth = queued;
    double q = EstimateTtft(snap, 0, o).queue_ms;
    CHECK(q >= prev);
    prev = q;
  }
}

TEST_CASE("requests without a slot each cost two service times", "[routing][estimate][queue]") {
  config::Snapshot snap = OneBackend(/*capacity=*/10);
  BackendObservation o = Healthy(5, 45);  // service 40
  o.load.at_ns = 1;

  SECTION("the backend reports a queue (other edges, or its own lower limit)") {
    o.load.inflight = 6;
    o.load.queue_depth = 3;
    TtftEstimate e = EstimateTtft(snap, 0, o);
    CHECK(e.queue_ms == Approx(4 * 2 * 40));  // three ahead, and ours
    CHECK(e.utilization == Approx(0.9));
  }
  SECTION("the backend reports every slot busy") {
    o.load.inflight = 10;
    o.load.queue_depth = 0;
    CHECK(EstimateTtft(snap, 0, o).queue_ms == Approx(2 * 40));
    o.load.inflight = 12;  // more running than configured: two ahead of us
    CHECK(EstimateTtft(snap, 0, o).queue_ms == Approx(3 * 2 * 40));
  }
  SECTION("our own in-flight requests are not counted twice") {
    o.inflight = 8;
    o.load.inflight = 8;  // the same eight, seen by the backend
    o.load.queue_depth = 0;
    CHECK(EstimateTtft(snap, 0, o).queue_ms == 0);
    CHECK(EstimateTtft(snap, 0, o).utilization == Approx(0.8));
  }
  SECTION("KV-cache use raises utilization, not the queue") {
    o.load.inflight = 2;
    o.load.queue_depth = 0;
    o.load.kv_cache_utilization = 0.95f;
    TtftEstimate e = EstimateTtft(snap, 0, o);
    CHECK(e.queue_ms == 0);
    CHECK(e.utilization == Approx(0.95));
  }
  SECTION("a stale report is ignored") {
    o.load.inflight = 10;
    o.load.queue_depth = 20;
    o.load_age_ms = LoadReportFreshMs(snap) + 1;
    CHECK(EstimateTtft(snap, 0, o).queue_ms == 0);
    o.load_age_ms = LoadReportFreshMs(snap);
    CHECK(EstimateTtft(snap, 0, o).queue_ms > 0);
  }
  SECTION("no report at all") {
    o.load.at_ns = 0;
    o.load.queue_depth = 50;
    CHECK(EstimateTtft(snap, 0, o).queue_ms == 0);
  }
}

TEST_CASE("the live view dates the load report", "[routing][estimate]") {
  health::BackendState s("b\nhttp://x");
  s.state = health::HealthState::kHealthy;
  s.rtt_ewma_us = 4'000;
  s.ttft_ewma_us = 30'000;
  s.ttft_at_ns = 1'000'000'000;
  s.since_ns = 500'000'000;
  s.load_at_ns = 1'200'000'000;
  s.load_queue_depth = 2;
  BackendObservation o = ObserveState(s, 1'500'000'000);
  CHECK(o.rtt_ms == Approx(4));
  CHECK(o.ttft_ms == Approx(30));
  CHECK(o.ttft_age_ms == Approx(500));
  CHECK(o.load_age_ms == Approx(300));
  CHECK(o.since_healthy_ms == Approx(1'000));
  CHECK(o.load.queue_depth == 2);
}

TEST_CASE("the live view keeps one TTFT per (backend, model)", "[routing][estimate]") {
  health::BackendState s("b\nhttp://x");
  s.state = health::HealthState::kHealthy;
  s.ttft_ewma_us = 300'000;  // backend-wide: every model's streams
  s.ttft_at_ns = 1'000'000'000;
  const uint64_t big = health::ModelKey("llama-3.1-70b");
  const uint64_t small = health::ModelKey("llama-3.1-8b");
  REQUIRE(big != small);
  health::ModelTtft* slot = s.ClaimModelSlot(big);
  REQUIRE(slot != nullptr);
  CHECK(s.ClaimModelSlot(big) == slot);  // claimed once, found after
  slot->ewma_us = 600'000;
  slot->at_ns = 1'100'000'000;

  // The slow model's samples are its own.
  BackendObservation o = ObserveState(s, 1'500'000'000, big);
  CHECK(o.ttft_ms == Approx(600));
  CHECK(o.ttft_age_ms == Approx(400));
  // A model without a sample on this backend has none: the prior stands in,
  // not the other model's 600 ms.
  o = ObserveState(s, 1'500'000'000, small);
  CHECK(o.ttft_ms == -1);
  // /admin/backends and the metrics see the backend-wide figure.
  o = ObserveState(s, 1'500'000'000);
  CHECK(o.ttft_ms == Approx(300));

  // With every slot taken by other models, a new model falls back to the
  // backend-wide estimate rather than to nothing.
  for (size_t i = 1; i < health::BackendState::kModelSlots; ++i)
    REQUIRE(s.ClaimModelSlot(health::ModelKey("m" + std::to_string(i))) != nullptr);
  CHECK(s.ClaimModelSlot(small) == nullptr);
  o = ObserveState(s, 1'500'000'000, small);
  CHECK(o.ttft_ms == Approx(300));

  // A backend back from an outage forgets every sample, its slots included.
  s.ResetTtft();
  CHECK(ObserveState(s, 1'500'000'000, big).ttft_ms == -1);
  CHECK(ObserveState(s, 1'500'000'000).ttft_ms == -1);
  CHECK(s.ClaimModelSlot(big) == slot);
}

}  // namespace
}  // namespace geogate::routing
