#include "health/health_stats.h"

#include <catch2/catch.hpp>

#include "test_support.h"

using namespace geogate::health;
using namespace geogate::health::testing;

TEST_CASE("stats: buckets", "[health][stats]") {
  CHECK(HealthStats::BucketFor(0.2) == 0);
  CHECK(HealthStats::BucketFor(1.0) == 0);  // "le" buckets: the bound is inclusive
  CHECK(HealthStats::BucketFor(1.5) == 1);
  CHECK(HealthStats::BucketFor(1000) == 9);
  CHECK(HealthStats::BucketFor(1000.5) == 10);  // +Inf
}

TEST_CASE("stats: per backend counters survive a reload of the same key", "[health][stats]") {
  HealthTable table;
  HealthStats stats;
  auto v1 = MakeSnapshot({MakeBackend("a", 0), MakeBackend("b", 1)});
  auto s1 = table.Bind(*v1);
  stats.update(*v1, s1);
  stats.RecordProbe(*s1[0], ProbeResult::Ok(std::chrono::microseconds(3000)));
  stats.RecordProbe(*s1[0], ProbeResult::Failed(FailureReason::kProbeTimeout));
  stats.RecordProbe(*s1[1], ProbeResult::Failed(FailureReason::kConnectRefused));
  stats.RecordChange(*s1[0], StateChange{"a", HealthState::kHealthy, HealthState::kUnhealthy,
                                         FailureReason::kUpstream5xx, true});
  stats.RecordChange(*s1[0], StateChange{"a", HealthState::kUnhealthy, HealthState::kHealthy,
                                         FailureReason::kNone, true});

  auto out = stats.snapshot();
  REQUIRE(out.size() == 2);
  CHECK(out[0].name == "a");
  CHECK(out[0].region == "r0");
  CHECK(out[0].probes_ok == 1);
  CHECK(out[0].probe_failures[static_cast<size_t>(FailureReason::kProbeTimeout)] == 1);
  REQUIRE(out[0].rtt_buckets.size() == std::size(kProbeRttBucketsMs) + 1);
  CHECK(out[0].rtt_buckets[2] == 1);  // 3 ms -> le 5
  CHECK(out[0].rtt_sum_seconds == Approx(0.003));
  CHECK(out[0].ejections == 1);
  CHECK(out[0].state_changes == 2);
  CHECK(out[1].probe_failures[static_cast<size_t>(FailureReason::kConnectRefused)] == 1);

  // Reload: "a" kept, "b" gone.
  auto v2 = MakeSnapshot({MakeBackend("a", 0)});
  auto s2 = table.Bind(*v2);
  stats.update(*v2, s2);
  out = stats.snapshot();
  REQUIRE(out.size() == 1);
  CHECK(out[0].probes_ok == 1);
  stats.RecordProbe(*s1[1], ProbeResult::Ok(std::chrono::microseconds(1)));  // gone: ignored
  CHECK(stats.snapshot().size() == 1);
}
