// Scaling signals: pools, desired backend counts (idle, saturated, target
// 1.0), the reasoning string, idle reserved dollars, JSON and metrics.
#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>

#include "accounting/capacity_export.h"
#include "accounting/capacity_report.h"
#include "showback_test_util.h"
#include "testing/simulated_time.h"

namespace geogate::accounting {
namespace {

using health::Millis;

/// Samples every backend of `cfg` once a second for `seconds` with fixed
/// in-flight counts (by backend index).
void Load(health::SimulatedTime& clock, UtilizationTracker& util, const config::Snapshot& cfg,
          const std::vector<uint32_t>& inflight, int seconds, std::vector<bool> routable = {}) {
  if (routable.empty()) routable.assign(cfg.backends.size(), true);
  auto sample = [&] {
    std::vector<UtilizationSample> s;
    for (size_t i = 0; i < cfg.backends.size(); ++i)
      s.push_back(
          {cfg.backends[i].state_key(), inflight[i], cfg.backends[i].capacity, routable[i]});
    util.Sample(clock.monotonic(), s);
  };
  sample();
  for (int i = 0; i < seconds; ++i) {
    clock.advance(Millis(1000));
    sample();
  }
}

const PoolReport* FindPool(const CapacityReport& r, std::string_view region, std::string_view gpu,
                           std::string_view model) {
  for (const PoolReport& p : r.pools)
    if (p.region == region && p.gpu == gpu && p.model == model) return &p;
  return nullptr;
}

constexpr std::string_view kThreeH100 = R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[capacity]
target_utilization = %s
[[regions]]
name = "eu-west"
jurisdiction = "EU"
location = { lat = 53.35, lon = -6.26 }
[[backends]]
name = "h1"
region = "eu-west"
url = "http://10.0.1.1:8000"
models = ["llama-70b"]
gpu = "H100"
capacity = 64
[[backends]]
name = "h2"
region = "eu-west"
url = "http://10.0.1.2:8000"
models = ["llama-70b"]
gpu = "H100"
capacity = 64
[[backends]]
name = "h3"
region = "eu-west"
url = "http://10.0.1.3:8000"
models = ["llama-70b"]
gpu = "H100"
capacity = 64
)";

config::SnapshotConstPtr ThreeH100(std::string target = "0.70") {
  std::string text(kThreeH100);
  text.replace(text.find("%s"), 2, target);
  return testing::LoadSnapshot(text);
}

TEST_CASE("desired backends: the fewest at or under the target, at least one",
          "[capacity][desired]") {
  CHECK(DesiredBackends(0, 64, 0.7) == 1);  // idle pool keeps one warm
  CHECK(DesiredBackends(1, 64, 0.7) == 1);
  CHECK(DesiredBackends(4 * 0.7 * 64, 64, 0.7) == 4);  // exactly four backends' worth
  CHECK(DesiredBackends(177, 64, 0.7) == 4);
  CHECK(DesiredBackends(192, 64, 0.7) == 5);  // three saturated backends
  CHECK(DesiredBackends(192, 64, 1.0) == 3);  // target 1.0: full is fine
  CHECK(DesiredBackends(192.5, 64, 1.0) == 4);
  CHECK(DesiredBackends(10, 0, 0.7) == 1);  // nonsense in, minimum out
}

TEST_CASE("the reasoning string says how the count was reached", "[capacity][desired]") {
  auto cfg = ThreeH100();
  health::SimulatedTime clock;
  UtilizationTracker util;
  Load(clock, util, *cfg, {59, 59, 59}, 300);
  CapacityReport r =
      BuildCapacityReport(*cfg, std::vector<bool>{true, true, true}, util, clock.monotonic());
  REQUIRE(r.pools.size() == 1);
  const PoolReport& p = r.pools[0];
  CHECK(p.routable_backends == 3);
  CHECK(p.configured_backends == 3);
  CHECK(*p.utilization[1] == Approx(177.0 / 192));
  CHECK(*p.mean_inflight_5m == Approx(177));
  CHECK(p.desired_backends == 4);
  CHECK(p.reason ==
        "5m utilization 0.92 (mean in-flight 177.0) over 3 backends (capacity 64 each) -> "
        "4 backends reach 0.69 <= target 0.70");
}

TEST_CASE("idle, saturated and target 1.0 pools", "[capacity][desired]") {
  health::SimulatedTime clock;
  SECTION("idle") {
    auto cfg = ThreeH100();
    UtilizationTracker util;
    Load(clock, util, *cfg, {0, 0, 0}, 300);
    CapacityReport r =
        BuildCapacityReport(*cfg, std::vector<bool>{true, true, true}, util, clock.monotonic());
    CHECK(r.pools[0].desired_backends == 1);
    CHECK(*r.pools[0].utilization[0] == 0);
    CHECK(r.pools[0].reason ==
          "5m utilization 0.00 (mean in-flight 0.0) over 3 backends (capacity 64 each) -> "
          "1 backend (the minimum) reaches 0.00 <= target 0.70");
  }
  SECTION("saturated") {
    auto cfg = ThreeH100();
    UtilizationTracker util;
    Load(clock, util, *cfg, {64, 64, 64}, 300);
    CapacityReport r =
        BuildCapacityReport(*cfg, std::vector<bool>{true, true, true}, util, clock.monotonic());
    CHECK(*r.pools[0].utilization[1] == Approx(1.0));
    CHECK(r.pools[0].desired_backends == 5);
    CHECK(r.pools[0].reason.find("-> 5 backends reach 0.60 <= target 0.70; saturated:") !=
          std::string::npos);
  }
  SECTION("target 1.0") {
    auto cfg = ThreeH100("1.0");
    UtilizationTracker util;
    Load(clock, util, *cfg, {64, 64, 64}, 300);
    CapacityReport r =
        BuildCapacityReport(*cfg, std::vector<bool>{true, true, true}, util, clock.monotonic());
    CHECK(r.target_utilization == 1.0);
    CHECK(r.pools[0].desired_backends == 3);
  }
  SECTION("no samples yet keeps the routable count") {
    auto cfg = ThreeH100();
    UtilizationTracker util;
    CapacityReport r =
        BuildCapacityReport(*cfg, std::vector<bool>{true, false, true}, util, clock.monotonic());
    CHECK_FALSE(r.pools[0].utilization[0]);
    CHECK_FALSE(r.pools[0].mean_inflight_5m);
    CHECK(r.pools[0].desired_backends == 2);
    CHECK(r.pools[0].reason ==
          "no in-flight samples in the last 5m over 2 backends (capacity 64 each) -> keep 2");
  }
  SECTION("an unroutable backend offers no capacity, its load still counts") {
    auto cfg = ThreeH100();
    UtilizationTracker util;
    Load(clock, util, *cfg, {32, 32, 0}, 300, {true, true, false});
    CapacityReport r =
        BuildCapacityReport(*cfg, std::vector<bool>{true, true, false}, util, clock.monotonic());
    CHECK(r.pools[0].routable_backends == 2);
    CHECK(*r.pools[0].utilization[1] == Approx(0.5));
    CHECK(r.pools[0].desired_backends == 2);
  }
}

TEST_CASE("pools are region x GPU x model and a multi-model backend is in each",
          "[capacity][pools]") {
  auto cfg = testing::Fleet();
  health::SimulatedTime clock;
  UtilizationTracker util;
  Load(clock, util, *cfg, {12, 40, 8, 16}, 300);
  CapacityReport r = BuildCapacityReport(*cfg, std::vector<bool>(4, true), util, clock.monotonic());
  REQUIRE(r.pools.size() == 4);
  CHECK(r.pools[0].model == "llama-70b");  // eu-west/H100 first
  CHECK(r.pools[1].model == "llama-8b");
  CHECK(r.pools[2].model == "mistral-7b");
  CHECK(r.pools[3].region == "us-east");
  const PoolReport* l8 = FindPool(r, "eu-west", "L4", "llama-8b");
  const PoolReport* m7 = FindPool(r, "eu-west", "L4", "mistral-7b");
  REQUIRE(l8);
  REQUIRE(m7);
  CHECK(*l8->utilization[0] == Approx(0.5));
  CHECK(*m7->utilization[0] == Approx(0.5));
  const PoolReport* h100 = FindPool(r, "eu-west", "H100", "llama-70b");
  CHECK(*h100->utilization[2] == Approx(52.0 / 128));
  CHECK(h100->desired_backends == 2);  // 52 / (0.7 * 64) = 1.16
}

TEST_CASE("idle reserved capacity is priced while paid backends carry its load",
          "[capacity][reserved]") {
  auto cfg = testing::Fleet();
  health::SimulatedTime clock;

  SECTION("on-demand carries less than the reserved headroom") {
    UtilizationTracker util;
    // eu-h100-r1 at a mean of 12.5: headroom to 0.7 is 32.3 streams; od1 carries 10.
    Load(clock, util, *cfg, {13, 10, 8, 0}, 150);
    Load(clock, util, *cfg, {12, 10, 8, 0}, 150);  // mean about 12.5
    CapacityReport r =
        BuildCapacityReport(*cfg, std::vector<bool>(4, true), util, clock.monotonic());
    REQUIRE(r.reserved_idle.size() == 2);  // eu-west/H100 and us-east/H100; L4 has no reserved
    const ReservedIdle& eu = r.reserved_idle[0];
    CHECK(eu.region == "eu-west");
    CHECK(eu.gpu == "H100");
    REQUIRE(eu.backends.size() == 1);
    CHECK(eu.backends[0].name == "eu-h100-r1");
    CHECK(eu.backends[0].idle_share == Approx(10.0 / 64));
    CHECK(eu.dollars_per_hour == Approx(10.0 / 64 * 2.49));
    const ReservedIdle& us = r.reserved_idle[1];
    CHECK(us.region == "us-east");
    CHECK(us.dollars_per_hour == 0);  // nothing paid carries load there
  }
  SECTION("on-demand carries more than the headroom") {
    UtilizationTracker util;
    Load(clock, util, *cfg, {12, 40, 0, 0}, 300);
    CapacityReport r =
        BuildCapacityReport(*cfg, std::vector<bool>(4, true), util, clock.monotonic());
    CHECK(r.reserved_idle[0].backends[0].idle_share == Approx((0.7 * 64 - 12) / 64));
    CHECK(r.reserved_idle[0].dollars_per_hour == Approx((0.7 * 64 - 12) / 64 * 2.49));
  }
  SECTION("a reserved backend at the target, or down, wastes nothing") {
    UtilizationTracker util;
    Load(clock, util, *cfg, {50, 40, 0, 0}, 300);
    CapacityReport r =
        BuildCapacityReport(*cfg, std::vector<bool>(4, true), util, clock.monotonic());
    CHECK(r.reserved_idle[0].dollars_per_hour == 0);
    UtilizationTracker util2;
    Load(clock, util2, *cfg, {0, 40, 0, 0}, 300);
    r = BuildCapacityReport(*cfg, std::vector<bool>{false, true, true, true}, util2,
                            clock.monotonic());
    CHECK(r.reserved_idle[0].dollars_per_hour == 0);
  }
}

TEST_CASE("capacity JSON and metrics", "[capacity][export]") {
  auto cfg = testing::Fleet();
  health::SimulatedTime clock;
  UtilizationTracker util;
  Load(clock, util, *cfg, {12, 40, 8, 0}, 90);
  CapacityReport r = BuildCapacityReport(*cfg, std::vector<bool>(4, true), util, clock.monotonic());

  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(CapacityJson(r), ec);
  REQUIRE_FALSE(ec);
  CHECK(v.at("target_utilization").as_double() == Approx(0.7));
  const auto& pool = v.at("pools").at(0);
  CHECK(pool.at("region").as_string() == "eu-west");
  CHECK(pool.at("backends").as_int64() == 2);
  CHECK(pool.at("desired_backends").as_int64() == 2);
  CHECK(pool.at("utilization").at("1m").as_double() == Approx(52.0 / 128));
  CHECK(pool.at("reason").as_string().size() > 0);
  CHECK(v.at("reserved_idle").at(0).at("backends").at(0).at("name").as_string() == "eu-h100-r1");

  observability::PromWriter w;
  WriteCapacityMetrics(w, r);
  const std::string& text = w.text();
  CHECK(text.find("# TYPE geogate_pool_utilization gauge\n") != std::string::npos);
  CHECK(text.find("geogate_pool_utilization{region=\"eu-west\",gpu=\"H100\",model=\"llama-70b\","
                  "window=\"1m\"} 0.40625\n") != std::string::npos);
  CHECK(text.find("geogate_pool_desired_backends{region=\"eu-west\",gpu=\"H100\","
                  "model=\"llama-70b\"} 2\n") != std::string::npos);
  CHECK(
      text.find("geogate_pool_backends{region=\"us-east\",gpu=\"H100\",model=\"llama-70b\"} 1\n") !=
      std::string::npos);
  CHECK(
      text.find("geogate_reserved_idle_cost_dollars_per_hour{region=\"eu-west\",gpu=\"H100\"} ") !=
      std::string::npos);
  CHECK(text.find("gpu=\"L4\"} ") == std::string::npos);  // no reserved L4: no idle sample
}

TEST_CASE("the capacity JSON has the documented member order and number text", "[capacity]") {
  // docs/showback.md, "/admin/capacity": the same report, written by hand.
  CapacityReport r;
  PoolReport p;
  p.region = "eu-west";
  p.gpu = "H100";
  p.model = "llama-3.1-70b";
  p.routable_backends = 3;
  p.configured_backends = 3;
  p.capacity_per_backend = 64;
  p.utilization = {0.95, 0.921875, 0.8};
  p.mean_inflight_5m = 177;
  p.desired_backends = 4;
  p.reason = "5m utilization 0.92 -> 4 backends";
  r.pools.push_back(p);
  p.model = "\"odd\"";
  p.utilization = {std::nullopt, std::nullopt, std::nullopt};
  p.mean_inflight_5m = std::nullopt;
  r.pools.push_back(p);
  r.reserved_idle.push_back({"eu-west", "H100", 0.389, {{"eu-h100-r1", 0.195, 0.156, 0.389}}});
  CHECK(CapacityJson(r) ==
        R"({"target_utilization":0.7,)"
        R"("pools":[{"region":"eu-west","gpu":"H100","model":"llama-3.1-70b","backends":3,)"
        R"("configured_backends":3,"capacity_per_backend":64,)"
        R"("utilization":{"1m":0.95,"5m":0.921875,"15m":0.8},"mean_inflight_5m":177,)"
        R"("desired_backends":4,"reason":"5m utilization 0.92 -> 4 backends"},)"
        R"({"region":"eu-west","gpu":"H100","model":"\"odd\"","backends":3,)"
        R"("configured_backends":3,"capacity_per_backend":64,)"
        R"("utilization":{"1m":null,"5m":null,"15m":null},"mean_inflight_5m":null,)"
        R"("desired_backends":4,"reason":"5m utilization 0.92 -> 4 backends"}],)"
        R"("reserved_idle":[{"region":"eu-west","gpu":"H100","dollars_per_hour":0.389,)"
        R"("backends":[{"name":"eu-h100-r1","utilization_5m":0.195,)"
        R"("idle_share":0.156,"dollars_per_hour":0.389}]}]})");
}

}  // namespace
}  // namespace geogate::accounting
