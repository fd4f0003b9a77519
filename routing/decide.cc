#include "routing/decide.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace geogate::routing {

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kRoute:
      return "route";
    case Outcome::kResidencyDenied:
      return "residency_denied";
    case Outcome::kNoHealthy:
      return "no_healthy";
    case Outcome::kCapacity:
      return "capacity";
  }
  return "unknown";
}

double HaversineKm(const config::GeoPoint& a, const config::GeoPoint& b) {
  constexpr double kEarthRadiusKm = 6371.0;
  constexpr double kRad = M_PI / 180.0;
  double dlat = (b.lat - a.lat) * kRad;
  double dlon = (b.lon - a.lon) * kRad;
  double h = std::sin(dlat / 2) * std::sin(dlat / 2) +
             std::cos(a.lat * kRad) * std::cos(b.lat * kRad) * std::sin(dlon / 2) *
                 std::sin(dlon / 2);
  return 2 * kEarthRadiusKm * std::asin(std::min(1.0, std::sqrt(h)));
}

double ExpectedTtftMs(const config::Snapshot& snap, size_t backend,
                      const BackendObservation& obs) {
  const config::Backend& b = snap.backends[backend];
  const config::Region& r = snap.regions[b.region_index];
  double prior_rtt = HaversineKm(snap.gateway.location, r.location) / 100.0;
  double rtt = obs.rtt_ms >= 0 ? obs.rtt_ms : prior_rtt;
  double ttft = obs.ttft_ms >= 0 ? obs.ttft_ms : static_cast<double>(snap.routing.prior_ttft.count());
  return rtt + ttft;
}

Decision Decide(const config::Snapshot& snap, const RequestFacts& facts,
                const config::RegionSet& allowed, const HealthView& health,
                health::MonotonicTime, uint64_t random) {
  Decision d;
  const std::vector<size_t>& serving = snap.backends_by_model[facts.model];
  bool any_allowed = false, any_routable = false;
  std::vector<size_t> candidates;
  for (size_t idx : serving) {
    const config::Backend& b = snap.backends[idx];
    if (!allowed.contains(b.region_index)) continue;
    if (b.tier == config::Tier::kSpot && (facts.tenant == nullptr || !facts.tenant->allow_spot))
      continue;
    any_allowed = true;
    BackendObservation obs = health.Observe(idx);
    if (!obs.routable()) continue;
    any_routable = true;
    if (obs.inflight >= b.capacity) continue;
    candidates.push_back(idx);
  }
  if (candidates.empty()) {
    d.outcome = !any_allowed    ? Outcome::kResidencyDenied
                : !any_routable ? Outcome::kNoHealthy
                                : Outcome::kCapacity;
    d.reason = OutcomeName(d.outcome);
    return d;
  }
  // Spread evenly: rotate the candidate list by the random input.
  std::rotate(candidates.begin(), candidates.begin() + random % candidates.size(),
              candidates.end());
  d.plan = std::move(candidates);
  for (size_t idx : d.plan) d.expected_ttft_ms.push_back(ExpectedTtftMs(snap, idx, health.Observe(idx)));
  d.reason = absl::StrCat("even spread: ", snap.backends[d.plan.front()].name);
  return d;
}

}  // namespace geogate::routing
