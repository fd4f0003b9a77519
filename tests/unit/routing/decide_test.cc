// Backend selection, one behaviour per case (DESIGN.md §7 "Selection order").
// decide_property_test.cc checks the same rules over generated cases.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "decide_test_util.h"
#include "routing/decide.h"

namespace geogate::routing {
namespace {

using config::Tier;
using testing::DecideAll;
using testing::Healthy;
using testing::SnapshotBuilder;
using testing::VectorHealthView;

std::string Name(const config::Snapshot& snap, size_t idx) {
  return snap.backends[idx].name;
}

std::vector<std::string> PlanNames(const config::Snapshot& snap, const Decision& d) {
  std::vector<std::string> out;
  for (size_t i : d.plan)
    out.push_back(Name(snap, i));
  return out;
}

/// Three regions at increasing distance, one backend each, all measured.
struct ThreeRegions {
  ThreeRegions() {
    sb.Region("near").Region("mid").Region("far").Model("m");
    near = sb.Backend("near-1", "near");
    mid = sb.Backend("mid-1", "mid");
    far = sb.Backend("far-1", "far");
    snap = sb.Build();
    view[near] = Healthy(2, 22);
    view[mid] = Healthy(30, 50);
    view[far] = Healthy(90, 110);
  }
  SnapshotBuilder sb;
  size_t near = 0, mid = 0, far = 0;
  config::Snapshot snap;
  VectorHealthView view;
};

TEST_CASE("the lowest expected TTFT wins and the rest follow as failover", "[routing][decide]") {
  ThreeRegions t;
  Decision d = DecideAll(t.snap, t.view);
  REQUIRE(d.outcome == Outcome::kRoute);
  CHECK(PlanNames(t.snap, d) == std::vector<std::string>{"near-1", "mid-1", "far-1"});
  CHECK(d.expected_ttft_ms.size() == 3);
  CHECK(d.expected_ttft_ms[0] == Approx(22));
  CHECK(std::string(d.why) == "latency");
  CHECK(d.runner_up == t.mid);
  CHECK(d.Reason(t.snap) == "near-1 ettft=22.0ms; runner-up mid-1 ettft=50.0ms lost on latency");
}

TEST_CASE("a close region with a long queue loses to a farther idle one", "[routing][decide]") {
  ThreeRegions t;
  BackendObservation& near = t.view[t.near];
  near.load.at_ns = 1;
  near.load.inflight = 64;
  near.load.queue_depth = 10;  // other edges filled it
  Decision d = DecideAll(t.snap, t.view);
  CHECK(PlanNames(t.snap, d) == std::vector<std::string>{"mid-1", "far-1", "near-1"});
  // 20 ms of service, then 11 waiting (ten queued ahead and ours) at two
  // service times each.
  CHECK(d.expected_ttft_ms.back() == Approx(2 + 20 + 11 * 2 * 20));
}

TEST_CASE("a slower backend takes over when the close one's TTFT rises", "[routing][decide]") {
  ThreeRegions t;
  t.view[t.near].ttft_ms = 400;
  CHECK(Name(t.snap, DecideAll(t.snap, t.view).plan[0]) == "mid-1");
}

TEST_CASE("within the latency slack the cheaper tier wins", "[routing][decide][tier]") {
  SnapshotBuilder sb;
  sb.Region("eu").Model("m");
  size_t od = sb.Backend("eu-od", "eu", Tier::kOnDemand);
  size_t res = sb.Backend("eu-res", "eu", Tier::kReserved);
  config::Snapshot snap = sb.Build();
  VectorHealthView view;
  view[od] = Healthy(10, 42.1);
  view[res] = Healthy(10, 44.0);

  Decision d = DecideAll(snap, view);
  CHECK(PlanNames(snap, d) == std::vector<std::string>{"eu-res", "eu-od"});
  CHECK(std::string(d.why) == "tier");
  CHECK(d.Reason(snap) == "eu-res ettft=44.0ms; runner-up eu-od ettft=42.1ms lost on tier");

  SECTION("a full reserved backend is named as the runner-up") {
    view[res].inflight = 64;
    Decision d2 = DecideAll(snap, view);
    CHECK(PlanNames(snap, d2) == std::vector<std::string>{"eu-od"});
    CHECK(std::string(d2.why) == "runner_up_full");
    CHECK(d2.Reason(snap) == "eu-od ettft=42.1ms; runner-up eu-res ettft=44.0ms lost on capacity");
  }
  SECTION("a full backend that would not have won is not named") {
    view[res].ttft_ms = 42.1 + 30;  // outside the window anyway
    view[res].inflight = 64;
    CHECK(std::string(DecideAll(snap, view).why) == "only_candidate");
  }
  SECTION("but not beyond it") {
    view[res].ttft_ms = 42.1 + 20.5;
    Decision far = DecideAll(snap, view);
    CHECK(PlanNames(snap, far) == std::vector<std::string>{"eu-od", "eu-res"});
    CHECK(std::string(far.why) == "latency");
  }
  SECTION("exactly at the slack edge it is still in the window") {
    view[od].ttft_ms = 42;
    view[res].ttft_ms = 62;
    CHECK(Name(snap, DecideAll(snap, view).plan[0]) == "eu-res");
  }
}

TEST_CASE("spot comes after on-demand and only for tenants that allow it",
          "[routing][decide][tier]") {
  SnapshotBuilder sb;
  sb.Region("eu").Model("m");
  size_t spot = sb.Backend("eu-spot", "eu", Tier::kSpot);
  size_t od = sb.Backend("eu-od", "eu", Tier::kOnDemand);
  config::Snapshot snap = sb.Build();
  VectorHealthView view;
  view[spot] = Healthy(5, 20);  // the fastest
  view[od] = Healthy(5, 30);
  config::Tenant careful, thrifty;
  thrifty.allow_spot = true;

  CHECK(PlanNames(snap, DecideAll(snap, view)) == std::vector<std::string>{"eu-od"});
  CHECK(PlanNames(snap, DecideAll(snap, view, 1, &careful)) == std::vector<std::string>{"eu-od"});
  CHECK(PlanNames(snap, DecideAll(snap, view, 1, &thrifty)) ==
        std::vector<std::string>{"eu-od", "eu-spot"});

  SECTION("a spot-only pool is not offered to a tenant without allow_spot") {
    SnapshotBuilder only;
    only.Region("eu").Model("m");
    only.Backend("eu-spot", "eu", Tier::kSpot);
    config::Snapshot s = only.Build();
    VectorHealthView v;
    v[0] = Healthy();
    CHECK(DecideAll(s, v).outcome == Outcome::kResidencyDenied);  // classification kept
    CHECK(DecideAll(s, v, 1, &thrifty).outcome == Outcome::kRoute);
  }
}

TEST_CASE("gpu_preference orders the window before tier", "[routing][decide][gpu]") {
  SnapshotBuilder sb;
  sb.Region("eu").Model("small", {"L4", "T4", "H100"});
  size_t h100 = sb.Backend("h100-res", "eu", Tier::kReserved, 64, "H100");
  size_t l4 = sb.Backend("l4-od", "eu", Tier::kOnDemand, 64, "L4");
  size_t a10 = sb.Backend("a10-res", "eu", Tier::kReserved, 64, "A10");  // not listed
  size_t t4 = sb.Backend("t4-od", "eu", Tier::kOnDemand, 64, "T4");
  config::Snapshot snap = sb.Build();
  VectorHealthView view;
  view[h100] = Healthy(5, 25);
  view[l4] = Healthy(5, 40);
  view[a10] = Healthy(5, 20);
  view[t4] = Healthy(5, 35);

  Decision d = DecideAll(snap, view);
  CHECK(PlanNames(snap, d) == std::vector<std::string>{"l4-od", "t4-od", "h100-res", "a10-res"});
  CHECK(std::string(d.why) == "gpu_preference");
  CHECK(d.Reason(snap) ==
        "l4-od ettft=40.0ms; runner-up t4-od ettft=35.0ms lost on gpu preference");

  SECTION("a preferred GPU outside the slack falls behind a faster bigger one") {
    view[l4].ttft_ms = 210;
    view[t4].ttft_ms = 200;
    Decision slow = DecideAll(snap, view);
    CHECK(PlanNames(snap, slow) ==
          std::vector<std::string>{"h100-res", "a10-res", "t4-od", "l4-od"});
  }
}

TEST_CASE("a backend with too little VRAM for the model is no candidate",
          "[routing][decide][gpu]") {
  SnapshotBuilder sb;
  sb.Region("eu").Model("big", {}, /*min_vram_gb=*/80);
  size_t small = sb.Backend("l4", "eu", Tier::kReserved, 64, "L4", {}, 1, /*vram_gb=*/24);
  size_t unknown = sb.Backend("x", "eu", Tier::kOnDemand, 64, "H100");  // vram not declared
  size_t big = sb.Backend("h100", "eu", Tier::kOnDemand, 64, "H100", {}, 1, 80);
  config::Snapshot snap = sb.Build();
  VectorHealthView view;
  view[small] = Healthy(1, 5);
  view[unknown] = Healthy(1, 30);
  view[big] = Healthy(1, 20);
  CHECK(PlanNames(snap, DecideAll(snap, view)) == std::vector<std::string>{"h100", "x"});

  SECTION("only backends that are too small: 503 with the cause in the reason") {
    view[unknown].state = health::HealthState::kUnhealthy;
    view[big].state = health::HealthState::kUnhealthy;
    Decision d = DecideAll(snap, view);
    CHECK(d.outcome == Outcome::kNoHealthy);
    CHECK(d.Reason(snap) ==
          "no_healthy: 0 of 3 allowed backends routable (1 too small for the model)");
  }
}

TEST_CASE("a backend at capacity is skipped while others have room",
          "[routing][decide][capacity]") {
  ThreeRegions t;
  t.view[t.near].inflight = 64;
  Decision d = DecideAll(t.snap, t.view);
  CHECK(PlanNames(t.snap, d) == std::vector<std::string>{"mid-1", "far-1"});
  CHECK(std::string(d.why) == "runner_up_full");
  CHECK(d.runner_up == t.near);
  // Named with what it would offer with a free slot.
  CHECK(d.Reason(t.snap) == "mid-1 ettft=50.0ms; runner-up near-1 ettft=22.0ms lost on capacity");

  SECTION("one below capacity is still a candidate but nearly full costs headroom") {
    t.view[t.near].inflight = 63;
    Decision nearly = DecideAll(t.snap, t.view);
    CHECK(PlanNames(t.snap, nearly) == std::vector<std::string>{"mid-1", "near-1", "far-1"});
    t.view[t.near].inflight = 51;  // 80 %: no headroom cost yet
    CHECK(DecideAll(t.snap, t.view).plan[0] == t.near);
  }
  SECTION("all full: kCapacity (the gateway waits queue_timeout_ms, then 429)") {
    t.view[t.mid].inflight = 64;
    t.view[t.far].inflight = 100;
    Decision full = DecideAll(t.snap, t.view);
    CHECK(full.outcome == Outcome::kCapacity);
    CHECK(full.plan.empty());
    CHECK(std::string(full.why) == "capacity");
    CHECK(full.Reason(t.snap) == "capacity: all 3 routable backends full");
  }
}

TEST_CASE("unhealthy and ejected backends are out and named when faster",
          "[routing][decide][health]") {
  ThreeRegions t;
  t.view[t.near].state = health::HealthState::kUnhealthy;
  Decision d = DecideAll(t.snap, t.view);
  CHECK(PlanNames(t.snap, d) == std::vector<std::string>{"mid-1", "far-1"});
  CHECK(std::string(d.why) == "runner_up_unhealthy");
  CHECK(d.Reason(t.snap) == "mid-1 ettft=50.0ms; runner-up near-1 ettft=22.0ms lost on health");

  t.view[t.near].state = health::HealthState::kHealthy;
  t.view[t.near].ejected = true;
  t.view[t.mid].state = health::HealthState::kUnknown;  // never probed yet
  CHECK(PlanNames(t.snap, DecideAll(t.snap, t.view)) == std::vector<std::string>{"far-1"});

  t.view[t.far].ejected = true;
  Decision none = DecideAll(t.snap, t.view);
  CHECK(none.outcome == Outcome::kNoHealthy);
  CHECK(none.Reason(t.snap) == "no_healthy: 0 of 3 allowed backends routable");
}

TEST_CASE("the plan never leaves the allowed regions", "[routing][decide][residency]") {
  ThreeRegions t;
  config::RegionSet eu(t.snap.regions.size());
  eu.insert(t.snap.region_by_name.at("far"));
  RequestFacts facts{0, nullptr};
  Decision d = Decide(t.snap, facts, eu, t.view, 7);
  CHECK(PlanNames(t.snap, d) == std::vector<std::string>{"far-1"});
  CHECK(std::string(d.why) == "only_candidate");
  CHECK(d.Reason(t.snap) == "far-1 ettft=110.0ms; only candidate");

  SECTION("an allowed backend down is 503 even with healthy ones elsewhere") {
    t.view[t.far].state = health::HealthState::kUnhealthy;
    CHECK(Decide(t.snap, facts, eu, t.view, 7).outcome == Outcome::kNoHealthy);
  }
  SECTION("a model served only outside the allowed set is 451") {
    SnapshotBuilder sb;
    sb.Region("eu").Region("us").Model("m");
    sb.Backend("us-1", "us");
    config::Snapshot snap = sb.Build();
    VectorHealthView v;
    v[0] = Healthy();
    config::RegionSet only_eu(2);
    only_eu.insert(0);
    Decision denied = Decide(snap, facts, only_eu, v, 7);
    CHECK(denied.outcome == Outcome::kResidencyDenied);
    CHECK(std::string(denied.why) == "residency_denied");
  }
}

TEST_CASE("equals within tie_ms go to the less utilized of two choices", "[routing][decide][p2c]") {
  SnapshotBuilder sb;
  sb.Region("eu").Model("m");
  size_t a = sb.Backend("a", "eu", Tier::kReserved, 10);
  size_t b = sb.Backend("b", "eu", Tier::kReserved, 10);
  config::Snapshot snap = sb.Build();
  VectorHealthView view;
  view[a] = Healthy(5, 40, /*inflight=*/6);
  view[b] = Healthy(5, 41.5, /*inflight=*/2);  // slower by less than tie_ms (2)
  for (uint64_t r = 0; r < 50; ++r) {
    Decision d = DecideAll(snap, view, r);
    CHECK(d.plan[0] == b);
    CHECK(std::string(d.why) == "utilization");
    CHECK(d.Reason(snap) == "b ettft=41.5ms; runner-up a ettft=40.0ms lost on utilization");
  }
  SECTION("beyond tie_ms the faster one wins regardless of load") {
    view[b].ttft_ms = 43;
    Decision d = DecideAll(snap, view);
    CHECK(d.plan[0] == a);
    CHECK(std::string(d.why) == "latency");
  }
}

TEST_CASE("the same random input gives the same decision", "[routing][decide][p2c]") {
  SnapshotBuilder sb;
  sb.Region("eu").Model("m");
  VectorHealthView view;
  for (int i = 0; i < 6; ++i)
    view[sb.Backend("b" + std::to_string(i), "eu")] = Healthy(5, 40, static_cast<uint32_t>(i % 2));
  config::Snapshot snap = sb.Build();
  std::mt19937_64 rng(42);
  std::map<size_t, int> winners;
  for (int i = 0; i < 200; ++i) {
    uint64_t r = rng();
    Decision x = DecideAll(snap, view, r), y = DecideAll(snap, view, r);
    CHECK(x.plan == y.plan);
    CHECK(x.Reason(snap) == y.Reason(snap));
    winners[x.plan[0]]++;
  }
  CHECK(winners.size() > 1);  // and different inputs spread the choice
}

TEST_CASE("power of two choices spreads a burst over equals", "[routing][decide][p2c]") {
  SnapshotBuilder sb;
  sb.Region("eu").Model("m");
  VectorHealthView view;
  for (int i = 0; i < 4; ++i)
    view[sb.Backend("b" + std::to_string(i), "eu", Tier::kReserved, 1000)] = Healthy(5, 40);
  config::Snapshot snap = sb.Build();
  std::mt19937_64 rng(7);
  // 400 requests arrive before any finishes: each one's in-flight count is
  // what the next decision sees. Without spreading one backend would take all.
  for (int i = 0; i < 400; ++i)
    view[DecideAll(snap, view, rng()).plan[0]].inflight++;
  uint32_t lo = 1000, hi = 0;
  for (size_t i = 0; i < 4; ++i) {
    lo = std::min(lo, view[i].inflight);
    hi = std::max(hi, view[i].inflight);
  }
  INFO("in flight per backend between " << lo << " and " << hi);
  CHECK(hi - lo <= 4);
}

TEST_CASE("power of two choices favours the least loaded and never the most",
          "[routing][decide][p2c]") {
  SnapshotBuilder sb;
  sb.Region("eu").Model("m");
  VectorHealthView view;
  for (uint32_t i = 0; i < 4; ++i)
    view[sb.Backend("b" + std::to_string(i), "eu", Tier::kReserved, 100)] =
        Healthy(5, 40, 10 * (i + 1));
  config::Snapshot snap = sb.Build();
  std::mt19937_64 rng(11);
  std::array<int, 4> wins{};
  const int n = 20000;
  for (int i = 0; i < n; ++i)
    wins[DecideAll(snap, view, rng()).plan[0]]++;
  // Two distinct of four: the least loaded is in the pair half the time,
  // the second in 1/3 of the time, the third 1/6, the most loaded never wins.
  CHECK(wins[0] / double(n) == Approx(0.5).margin(0.02));
  CHECK(wins[1] / double(n) == Approx(1.0 / 3).margin(0.02));
  CHECK(wins[2] / double(n) == Approx(1.0 / 6).margin(0.02));
  CHECK(wins[3] == 0);
}

TEST_CASE("weights scale the share among equals", "[routing][decide][p2c]") {
  SnapshotBuilder sb;
  sb.Region("eu").Model("m");
  size_t heavy = sb.Backend("heavy", "eu", Tier::kReserved, 1000, "L4", {}, /*weight=*/3);
  size_t light = sb.Backend("light", "eu", Tier::kReserved, 1000, "L4", {}, /*weight=*/1);
  config::Snapshot snap = sb.Build();
  VectorHealthView view;
  view[heavy] = Healthy(5, 40);
  view[light] = Healthy(5, 40);
  std::mt19937_64 rng(3);

  SECTION("idle: each request goes by weight") {
    int n = 20000, to_heavy = 0;
    for (int i = 0; i < n; ++i)
      to_heavy += DecideAll(snap, view, rng()).plan[0] == heavy;
    CHECK(to_heavy / double(n) == Approx(0.75).margin(0.015));
  }
  SECTION("filling up: in-flight settles in proportion to weight") {
    for (int i = 0; i < 400; ++i)
      view[DecideAll(snap, view, rng()).plan[0]].inflight++;
    CHECK(view[heavy].inflight / 400.0 == Approx(0.75).margin(0.02));
  }
}

TEST_CASE("exploration measures a backend judged on the prior or an old sample",
          "[routing][decide][recovery]") {
  ThreeRegions t;
  // The near region had a hiccup long ago: one slow sample, no traffic since.
  t.view[t.near].ttft_ms = 300;
  t.view[t.near].ttft_age_ms = 12'000;  // stale, only partly decayed
  std::mt19937_64 rng(5);
  const int n = 3200;
  int explored = 0;
  for (int i = 0; i < n; ++i) {
    Decision d = DecideAll(t.snap, t.view, rng());
    if (std::string(d.why) == "exploration") {
      ++explored;
      CHECK(d.plan[0] == t.near);
      CHECK(PlanNames(t.snap, d) == std::vector<std::string>{"near-1", "mid-1", "far-1"});
      CHECK(d.Reason(t.snap).find("runner-up mid-1 ettft=50.0ms lost on exploration") !=
            std::string::npos);
    } else {
      CHECK(d.plan[0] == t.mid);
    }
  }
  CHECK(explored / double(n) == Approx(1.0 / 16).margin(0.015));

  SECTION("a fresh sample, however slow, is trusted") {
    t.view[t.near].ttft_age_ms = 100;
    for (uint64_t r = 0; r < 500; ++r)
      CHECK(DecideAll(t.snap, t.view, r).plan[0] == t.mid);
  }
  SECTION("a stale backend that would not win at the winner's speed is left alone") {
    t.view[t.near].rtt_ms = 29;  // 29 + mid's 20 ms service is within tie_ms of mid's 50
    for (uint64_t r = 0; r < 500; ++r)
      CHECK(std::string(DecideAll(t.snap, t.view, r).why) != "exploration");
  }
}

TEST_CASE("a returning backend is measured again at once", "[routing][decide][recovery]") {
  ThreeRegions t;
  // Back from an outage: TTFT EWMA cleared by the health module, fresh RTT.
  // With a prior above its real TTFT it would otherwise stay behind mid.
  t.view[t.near].ttft_ms = -1;
  t.view[t.near].since_healthy_ms = 150;
  t.view[t.mid].ttft_ms = 40;  // mid: 40 ms, ahead of near's 2 + 50 prior
  CHECK(ExpectedTtftMs(t.snap, t.near, t.view[t.near]) == Approx(2 + 50));
  int tried = 0;
  for (uint64_t r = 0; r < 320; ++r) {
    Decision d = DecideAll(t.snap, t.view, r);
    if (d.plan[0] == t.near) {
      CHECK(std::string(d.why) == "exploration");
      ++tried;
    }
  }
  CHECK(tried > 5);  // about one in 16
  // Its first sample (22 ms) puts it back in front for good.
  t.view[t.near].ttft_ms = 22;
  t.view[t.near].ttft_age_ms = 0;
  for (uint64_t r = 0; r < 200; ++r)
    CHECK(DecideAll(t.snap, t.view, r).plan[0] == t.near);
}

TEST_CASE("the worked example of docs/routing.md", "[routing][decide][docs]") {
  SnapshotBuilder sb;
  sb.Region("eu-central", 50.11, 8.68).Region("eu-west", 53.35, -6.26);
  sb.Region("eu-north", 59.33, 18.07).Region("us-east", 38.90, -77.04, "US");
  sb.Model("llama-3.1-8b", {"L4", "T4", "H100"});
  size_t h100 = sb.Backend("eu-central-h100-res-1", "eu-central", Tier::kReserved, 64, "H100");
  size_t od = sb.Backend("eu-central-l4-od-1", "eu-central", Tier::kOnDemand, 32, "L4");
  size_t w1 = sb.Backend("eu-west-l4-res-1", "eu-west", Tier::kReserved, 32, "L4");
  size_t w2 = sb.Backend("eu-west-l4-res-2", "eu-west", Tier::kReserved, 32, "L4");
  size_t north = sb.Backend("eu-north-l4-res-1", "eu-north", Tier::kReserved, 32, "L4");
  size_t full = sb.Backend("eu-central-l4-res-1", "eu-central", Tier::kReserved, 32, "L4");
  size_t us = sb.Backend("us-east-h100-1", "us-east", Tier::kOnDemand, 64, "H100");
  sb.routing().latency_slack = config::Millis(20);  // as the example says (default 80)
  config::Snapshot snap = sb.Build();
  VectorHealthView view;
  view[h100] = Healthy(3, 26, 4);
  view[od] = Healthy(3, 41, 5);
  view[w1] = Healthy(12, 44, 20);
  view[w2] = Healthy(12.5, 45.5, 8);
  view[north] = Healthy(24, -1, 0);
  view[full] = Healthy(3, 44, 0);
  view[full].load.at_ns = 1;
  view[full].load.inflight = 32;
  view[full].load.queue_depth = 3;
  view[us] = Healthy(1, 5);  // faster than all, and not allowed
  config::RegionSet eu(snap.regions.size());
  for (const char* r : {"eu-central", "eu-west", "eu-north"})
    eu.insert(snap.region_by_name.at(r));
  RequestFacts facts{0, nullptr};

  for (uint64_t random = 1; random <= 64; ++random) {
    Decision d = Decide(snap, facts, eu, view, random);
    CHECK(PlanNames(snap, d) ==
          std::vector<std::string>{"eu-west-l4-res-2", "eu-west-l4-res-1", "eu-central-l4-od-1",
                                   "eu-central-h100-res-1", "eu-north-l4-res-1",
                                   "eu-central-l4-res-1"});
    CHECK(d.expected_ttft_ms[4] == Approx(74));
    CHECK(d.expected_ttft_ms[5] == Approx(3 + 41 + 4 * 2 * 41));
    CHECK(d.Reason(snap) ==
          "eu-west-l4-res-2 ettft=45.5ms; runner-up eu-west-l4-res-1 ettft=44.0ms lost on "
          "utilization");
  }
  SECTION("the stale sample") {
    view[od].ttft_age_ms = 15'000;
    CHECK(ExpectedTtftMs(snap, od, view[od]) == Approx(47));
  }
  SECTION("the eu-west L4s 25 ms slower") {
    view[w1].ttft_ms += 25;
    view[w2].ttft_ms += 25;
    Decision d = Decide(snap, facts, eu, view, 1);
    CHECK(d.Reason(snap) ==
          "eu-central-l4-od-1 ettft=41.0ms; runner-up eu-central-h100-res-1 ettft=26.0ms lost "
          "on gpu preference");
  }
}

}  // namespace
}  // namespace geogate::routing
