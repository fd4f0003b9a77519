// Per-request cost of backend selection (routing::Decide) for a model served
// by 8 and by 64 backends, every one healthy and measured, mixed tiers and
// GPUs, some loaded: the whole path of DESIGN.md §7 runs each time. And of
// the residency decision before it (routing::DecideResidency) for a client
// that a rule governs, one that no rule matches, and one that narrows.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config/loader.h"
#include "routing/decide.h"
#include "routing/residency.h"

namespace {

using geogate::config::LoadString;
using geogate::config::SnapshotConstPtr;
using geogate::routing::BackendObservation;
using geogate::routing::Decide;
using geogate::routing::DecideResidency;
using geogate::routing::Decision;
using geogate::routing::HealthView;
using geogate::routing::RequestFacts;

SnapshotConstPtr Fleet(int backends) {
  std::string toml = R"(
[gateway]
location = { lat = 50.11, lon = 8.68 }
[[gateway.listeners]]
address = "127.0.0.1:0"
[[models]]
name = "m"
gpu_preference = ["L4", "T4", "H100"]
)";
  const char* gpus[] = {"L4", "H100", "T4", "A10"};
  const char* tiers[] = {"reserved", "on-demand", "on-demand", "spot"};
  for (int r = 0; r < 8; ++r)
    absl::StrAppend(&toml, "[[regions]]\nname = \"r", r, "\"\njurisdiction = \"",
                    r < 4 ? "EU" : "US", "\"\n", "location = { lat = ", 40 + r,
                    ", lon = ", -10 + 4 * r, " }\n");
  for (int b = 0; b < backends; ++b)
    absl::StrAppend(&toml, "[[backends]]\nname = \"b", b, "\"\nregion = \"r", b % 8,
                    "\"\nurl = \"http://10.0.0.", b + 1, ":8000\"\nmodels = [\"m\"]\n", "gpu = \"",
                    gpus[b % 4], "\"\ntier = \"", tiers[(b / 3) % 4], "\"\ncapacity = 32\n");
  absl::StrAppend(&toml, R"(
[[residency]]
name = "ch"
countries = ["CH"]
allow_regions = ["r0"]
[[residency]]
name = "eu"
continents = ["EU"]
allow_jurisdictions = ["EU"]
[[residency]]
name = "us"
countries = ["US", "CA"]
allow_jurisdictions = ["US"]
)");
  auto r = LoadString(toml, "bench.toml", "/tmp", [](const std::string&) { return std::nullopt; });
  if (!r.ok()) {
    for (const auto& e : r.errors)
      std::fprintf(stderr, "%s\n", e.ToString().c_str());
    std::abort();
  }
  return r.snapshot;
}

class FixedView final : public HealthView {
 public:
  explicit FixedView(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      BackendObservation o;
      o.state = geogate::health::HealthState::kHealthy;
      o.rtt_ms = 2.0 + static_cast<double>(i % 8) * 6.5;
      o.ttft_ms = o.rtt_ms + 30 + static_cast<double>(i % 5);
      o.ttft_age_ms = 200;
      o.since_healthy_ms = 60'000;
      o.inflight = static_cast<uint32_t>((i * 7) % 33);  // some full
      if (i % 2 == 0) {
        o.load.at_ns = 1;
        o.load.inflight = static_cast<int32_t>(o.inflight);
        o.load.queue_depth = static_cast<int32_t>(i % 3);
        o.load.kv_cache_utilization = 0.5f;
      }
      obs_.push_back(o);
    }
  }
  BackendObservation Observe(size_t backend, uint64_t) const override { return obs_[backend]; }

 private:
  std::vector<BackendObservation> obs_;
};

void BM_Decide(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  SnapshotConstPtr snap = Fleet(n);
  FixedView view(static_cast<size_t>(n));
  const auto allowed = snap->AllRegions();
  geogate::config::Tenant tenant;
  tenant.allow_spot = true;
  RequestFacts facts{0, &tenant};
  uint64_t random = 0x1234;
  size_t plan = 0;
  for (auto _ : state) {
    random = random * 6364136223846793005ULL + 1442695040888963407ULL;
    Decision d = Decide(*snap, facts, allowed, view, random);
    plan += d.plan.size();
    benchmark::DoNotOptimize(d);
  }
  state.counters["plan_len"] =
      benchmark::Counter(static_cast<double>(plan), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_Decide)->Arg(8)->Arg(64);

void BM_ExpectedTtft(benchmark::State& state) {
  SnapshotConstPtr snap = Fleet(8);
  FixedView view(8);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(geogate::routing::ExpectedTtftMs(*snap, i, view.Observe(i, 0)));
    i = (i + 1) & 7;
  }
}
BENCHMARK(BM_ExpectedTtft);

void BM_DecideResidency(benchmark::State& state, const char* country, const char* continent,
                        std::optional<std::string_view> narrowing, std::string_view rule) {
  SnapshotConstPtr snap = Fleet(8);
  geogate::routing::GeoInfo geo;
  geo.found = true;
  std::memcpy(geo.country, country, 3);
  std::memcpy(geo.continent, continent, 3);
  if (DecideResidency(*snap, geo, nullptr, narrowing).RuleLabel(*snap) != rule) {
    state.SkipWithError("not the decision this case is about");
    return;
  }
  for (auto _ : state) {
    auto d = DecideResidency(*snap, geo, nullptr, narrowing);
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK_CAPTURE(BM_DecideResidency, governed_DE, "DE", "EU", std::nullopt, "eu");
BENCHMARK_CAPTURE(BM_DecideResidency, ungoverned_JP, "JP", "AS", std::nullopt, "none");
BENCHMARK_CAPTURE(BM_DecideResidency, narrowed_DE_to_EU, "DE", "EU", std::string_view("EU"), "eu");

}  // namespace

BENCHMARK_MAIN();
