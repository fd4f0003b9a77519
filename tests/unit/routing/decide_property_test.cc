// Selection over thousands of generated fleets, policies, health and load
// states (seeded, so a failure names a reproducible case). Every rule of
// DESIGN.md §7 is checked against an independent computation here, not
// against Decide's own helpers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "decide_test_util.h"
#include "routing/decide.h"

namespace geogate::routing {
namespace {

using config::Tier;
using testing::SnapshotBuilder;
using testing::VectorHealthView;

const char* const kGpus[] = {"L4", "T4", "A10", "H100"};

struct Case {
  config::Snapshot snap;
  VectorHealthView view;
  config::RegionSet allowed;
  config::Tenant tenant;
  bool has_tenant = false;
  size_t model = 0;
  uint64_t random = 0;
};

template <class T>
T Pick(std::mt19937_64& rng, std::initializer_list<T> items) {
  return items.begin()[rng() % items.size()];
}

double Uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

bool Chance(std::mt19937_64& rng, double p) {
  return Uniform(rng, 0, 1) < p;
}

Case Generate(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Case c;
  SnapshotBuilder sb;
  sb.Edge(Uniform(rng, -50, 65), Uniform(rng, -180, 180));
  const size_t regions = 1 + rng() % 6;
  for (size_t r = 0; r < regions; ++r)
    sb.Region("r" + std::to_string(r), Uniform(rng, -50, 65), Uniform(rng, -180, 180));
  const size_t models = 1 + rng() % 3;
  for (size_t m = 0; m < models; ++m) {
    std::vector<std::string> prefs;
    for (const char* g : kGpus)
      if (Chance(rng, 0.5)) prefs.push_back(g);
    std::shuffle(prefs.begin(), prefs.end(), rng);
    std::optional<double> min_vram;
    if (Chance(rng, 0.3)) min_vram = Pick(rng, {20.0, 40.0, 80.0});
    sb.Model("m" + std::to_string(m), prefs, min_vram);
  }
  // Real fleets have twins: a third of the backends copy the previous one's
  // region, GPU, tier and models (and, below, nearly its latency), so
  // windows of several and groups of equals are common.
  const size_t backends = 1 + rng() % 24;
  std::vector<bool> twin(backends, false);
  std::string region, gpu;
  Tier tier = Tier::kOnDemand;
  std::vector<std::string> serves;
  std::optional<double> vram;
  for (size_t b = 0; b < backends; ++b) {
    twin[b] = b > 0 && Chance(rng, 0.35);
    if (!twin[b]) {
      serves.clear();
      for (size_t m = 0; m < models; ++m)
        if (Chance(rng, 0.6)) serves.push_back("m" + std::to_string(m));
      if (serves.empty()) serves.push_back("m" + std::to_string(rng() % models));
      vram.reset();
      if (Chance(rng, 0.5)) vram = Pick(rng, {16.0, 24.0, 48.0, 80.0});
      region = "r" + std::to_string(rng() % regions);
      tier = Pick(rng, {Tier::kReserved, Tier::kOnDemand, Tier::kSpot});
      gpu = kGpus[rng() % 4];
    }
    sb.Backend("b" + std::to_string(b), region, tier, static_cast<uint32_t>(1 + rng() % 16), gpu,
               serves, Pick(rng, {0.5, 1.0, 1.0, 2.0, 4.0}), vram);
  }
  sb.routing().latency_slack = config::Millis(Pick(rng, {0, 5, 20, 50}));
  sb.routing().tie = config::Millis(Pick(rng, {0, 2, 5}));
  sb.routing().prior_ttft = config::Millis(Pick(rng, {10, 50, 200}));
  c.snap = sb.Build();

  for (size_t b = 0; b < backends; ++b) {
    BackendObservation& o = c.view[b];
    double roll = Uniform(rng, 0, 1);
    o.state = roll < 0.7    ? health::HealthState::kHealthy
              : roll < 0.85 ? health::HealthState::kUnhealthy
                            : health::HealthState::kUnknown;
    o.ejected = Chance(rng, 0.1);
    o.rtt_ms = Chance(rng, 0.1) ? -1 : Uniform(rng, 0.5, 200);
    o.ttft_ms = Chance(rng, 0.3) ? -1 : std::max(o.rtt_ms, 0.0) + Uniform(rng, 0, 500);
    if (twin[b]) {
      o.rtt_ms = c.view[b - 1].rtt_ms;
      o.ttft_ms = c.view[b - 1].ttft_ms < 0 ? -1 : c.view[b - 1].ttft_ms + Uniform(rng, 0, 4);
    }
    o.ttft_age_ms = Uniform(rng, 0, 30'000);
    o.since_healthy_ms = Chance(rng, 0.2) ? 0 : Uniform(rng, 0, 60'000);
    o.inflight = static_cast<uint32_t>(rng() % (c.snap.backends[b].capacity + 3));
    if (Chance(rng, 0.5)) {
      o.load.at_ns = 1;
      o.load.inflight = static_cast<int32_t>(rng() % 20) - 1;
      o.load.queue_depth = static_cast<int32_t>(rng() % 8) - 1;
      o.load.kv_cache_utilization = static_cast<float>(Uniform(rng, -0.1, 1));
      o.load_age_ms = Uniform(rng, 0, 1000);
    }
  }
  c.allowed = config::RegionSet(regions);
  for (size_t r = 0; r < regions; ++r)
    if (Chance(rng, 0.6)) c.allowed.insert(r);
  c.has_tenant = Chance(rng, 0.7);
  c.tenant.allow_spot = Chance(rng, 0.5);
  c.model = rng() % models;
  c.random = rng();
  return c;
}

Decision Run(const Case& c) {
  RequestFacts facts{c.model, c.has_tenant ? &c.tenant : nullptr};
  return Decide(c.snap, facts, c.allowed, c.view, c.random);
}

uint32_t Rank(const config::Model& m, const std::string& gpu) {
  auto it = std::find(m.gpu_preference.begin(), m.gpu_preference.end(), gpu);
  return static_cast<uint32_t>(it - m.gpu_preference.begin());
}

bool InVocabulary(const char* why) {
  for (const char* w :
       {why::kOnlyCandidate, why::kLatency, why::kGpuPreference, why::kTier, why::kUtilization,
        why::kRunnerUpFull, why::kRunnerUpUnhealthy, why::kExploration})
    if (std::strcmp(why, w) == 0) return true;
  return false;
}

TEST_CASE("generated fleets: every selection rule holds", "[routing][decide][property]") {
  constexpr uint64_t kCases = 20000;
  size_t routed = 0, windows_of_several = 0, tier_wins = 0, gpu_wins = 0, p2c_wins = 0;
  size_t explorations = 0;
  size_t outcomes[4] = {};
  for (uint64_t seed = 1; seed <= kCases; ++seed) {
    const Case c = Generate(seed);
    const config::Snapshot& snap = c.snap;
    const config::Model& model = snap.models[c.model];
    const bool spot_ok = c.has_tenant && c.tenant.allow_spot;
    INFO("seed " << seed);

    // The candidate set and the classification, computed independently.
    std::set<size_t> expected;
    size_t eligible = 0, fit_routable = 0;
    for (size_t i = 0; i < snap.backends.size(); ++i) {
      const config::Backend& b = snap.backends[i];
      if (std::find(b.models.begin(), b.models.end(), model.name) == b.models.end()) continue;
      if (!c.allowed.contains(b.region_index)) continue;
      if (b.tier == Tier::kSpot && !spot_ok) continue;
      ++eligible;
      if (model.min_vram_gb && b.vram_gb && *b.vram_gb < *model.min_vram_gb) continue;
      const BackendObservation o = c.view.Observe(i, 0);
      if (o.state != health::HealthState::kHealthy || o.ejected) continue;
      ++fit_routable;
      if (o.inflight >= b.capacity) continue;
      expected.insert(i);
    }

    const Decision d = Run(c);
    outcomes[static_cast<size_t>(d.outcome)]++;
    if (expected.empty()) {
      Outcome want = eligible == 0       ? Outcome::kResidencyDenied
                     : fit_routable == 0 ? Outcome::kNoHealthy
                                         : Outcome::kCapacity;
      REQUIRE(d.outcome == want);
      REQUIRE(d.plan.empty());
      REQUIRE(std::string(d.why) == OutcomeName(want));
      continue;
    }
    ++routed;
    REQUIRE(d.outcome == Outcome::kRoute);

    // The plan is exactly the candidates: allowed, serving, fitting, spot
    // only where allowed, routable and below capacity; no duplicates.
    REQUIRE(std::set<size_t>(d.plan.begin(), d.plan.end()) == expected);
    REQUIRE(d.plan.size() == expected.size());
    REQUIRE(d.expected_ttft_ms.size() == d.plan.size());
    for (size_t k = 0; k < d.plan.size(); ++k) {
      const size_t i = d.plan[k];
      REQUIRE(c.allowed.contains(snap.backends[i].region_index));
      REQUIRE((spot_ok || snap.backends[i].tier != Tier::kSpot));
      REQUIRE(d.expected_ttft_ms[k] == ExpectedTtftMs(snap, i, c.view.Observe(i, 0)));
    }

    // Exploration puts one candidate without a fresh TTFT sample first, if
    // its RTT alone beats the winner's estimate; the rest keep their order.
    std::vector<size_t> p(d.plan.begin(), d.plan.end());
    std::vector<double> e(d.expected_ttft_ms.begin(), d.expected_ttft_ms.end());
    const double best = *std::min_element(e.begin(), e.end());
    if (std::strcmp(d.why, why::kExploration) == 0) {
      ++explorations;
      REQUIRE(p.size() > 1);
      const BackendObservation o = c.view.Observe(p[0], 0);
      const double stale = static_cast<double>(snap.routing.sample_stale.count());
      const bool fresh = o.ttft_ms >= 0 &&
                         !(o.since_healthy_ms > 0 && o.ttft_age_ms > o.since_healthy_ms) &&
                         o.ttft_age_ms <= stale;
      REQUIRE_FALSE(fresh);
      // It would win by more than tie_ms at the displaced winner's speed.
      const BackendObservation wo = c.view.Observe(p[1], 0);
      const double tie_ms = static_cast<double>(snap.routing.tie.count());
      REQUIRE(EstimateTtft(snap, p[0], o).rtt_ms + EstimateTtft(snap, p[1], wo).service_ms +
                  tie_ms <
              e[1]);
      p.erase(p.begin());
      e.erase(e.begin());
    }

    // (2)-(3): the window is what lies within the slack of the best, and it
    // comes first; failover targets follow by expected TTFT.
    const double slack = static_cast<double>(snap.routing.latency_slack.count());
    const double tie = static_cast<double>(snap.routing.tie.count());
    size_t window = 0;
    while (window < p.size() && e[window] <= best + slack)
      ++window;
    for (size_t k = window; k < p.size(); ++k) {
      REQUIRE(e[k] > best + slack);
      if (k > window) REQUIRE(e[k - 1] <= e[k]);
    }
    if (window == 1) REQUIRE(e[0] == *std::min_element(e.begin(), e.end()));  // fastest wins
    if (window > 1) ++windows_of_several;

    // (4): inside the window, GPU preference then tier never go backwards.
    auto key = [&](size_t k) {
      const config::Backend& b = snap.backends[p[k]];
      return std::make_pair(Rank(model, b.gpu), static_cast<int>(b.tier));
    };
    for (size_t k = 1; k < window; ++k)
      REQUIRE(key(k - 1) <= key(k));
    // The winner has the best rank and, among that rank, the cheapest tier.
    for (size_t k = 0; k < window; ++k)
      REQUIRE(key(0) <= key(k));
    // (5): the winner is within tie_ms of the fastest of its rank and tier;
    // beyond the equals, expected TTFT never goes backwards within one key.
    double fastest_of_key = e[0];
    size_t k_end = 1;
    while (k_end < window && key(k_end) == key(0))
      fastest_of_key = std::min(fastest_of_key, e[k_end++]);
    REQUIRE(e[0] <= fastest_of_key + tie + 1e-9);
    for (size_t k = 1; k < window; ++k) {
      bool both_equals =
          key(k) == key(0) && e[k] <= fastest_of_key + tie && e[k - 1] <= fastest_of_key + tie;
      if (key(k - 1) == key(k) && !both_equals) REQUIRE(e[k - 1] <= e[k]);
    }

    // The reason and its label.
    REQUIRE(InVocabulary(d.why));
    const std::string& winner = snap.backends[d.plan[0]].name;
    REQUIRE(d.Reason(c.snap).rfind(winner + " ettft=", 0) == 0);
    if (std::strcmp(d.why, why::kTier) == 0) ++tier_wins;
    if (std::strcmp(d.why, why::kGpuPreference) == 0) ++gpu_wins;
    if (std::strcmp(d.why, why::kUtilization) == 0) ++p2c_wins;

    // Pure: the same inputs give the same answer.
    const Decision again = Run(c);
    REQUIRE(again.plan == d.plan);
    REQUIRE(again.Reason(c.snap) == d.Reason(c.snap));
  }
  // The generator reaches every branch often enough to mean something.
  INFO("routed " << routed << " windows " << windows_of_several << " tier " << tier_wins << " gpu "
                 << gpu_wins << " p2c " << p2c_wins << " explorations " << explorations);
  CHECK(routed > kCases / 4);
  CHECK(windows_of_several > kCases / 20);
  CHECK(tier_wins > 50);
  CHECK(gpu_wins > 50);
  CHECK(p2c_wins > 50);
  CHECK(explorations > 50);
  for (size_t o : outcomes)
    CHECK(o > 100);
}

TEST_CASE("generated observations: priors and decay", "[routing][estimate][property]") {
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 5000; ++i) {
    const Case c = Generate(rng());
    const config::Snapshot& snap = c.snap;
    const size_t b = rng() % snap.backends.size();
    BackendObservation o = c.view.Observe(b, 0);
    o.load.at_ns = 0;
    o.inflight = 0;
    const double prior = static_cast<double>(snap.routing.prior_ttft.count());
    const double stale = static_cast<double>(snap.routing.sample_stale.count());
    const double km =
        HaversineKm(snap.gateway.location, snap.regions[snap.backends[b].region_index].location);
    INFO("case " << i);

    // No samples at all: the great-circle prior.
    BackendObservation none = o;
    none.rtt_ms = -1;
    none.ttft_ms = -1;
    REQUIRE(ExpectedTtftMs(snap, b, none) == Approx(km / 100 + prior));

    // A sample two stale periods old counts for nothing.
    BackendObservation old = o;
    old.rtt_ms = Uniform(rng, 0, 100);
    old.ttft_ms = old.rtt_ms + Uniform(rng, 0, 1000);
    old.since_healthy_ms = 0;
    old.ttft_age_ms = 2 * stale + Uniform(rng, 0, 1e6);
    REQUIRE(ExpectedTtftMs(snap, b, old) == Approx(old.rtt_ms + prior));

    // In between, the estimate lies between the sample and the prior.
    BackendObservation mid = old;
    mid.ttft_age_ms = Uniform(rng, 0, 2 * stale);
    const double service = EstimateTtft(snap, b, mid).service_ms;
    const double sampled = mid.ttft_ms - mid.rtt_ms;
    REQUIRE(service >= std::min(sampled, prior) - 1e-9);
    REQUIRE(service <= std::max(sampled, prior) + 1e-9);
  }
}

}  // namespace
}  // namespace geogate::routing
