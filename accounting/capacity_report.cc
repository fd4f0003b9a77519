#include "accounting/capacity_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace geogate::accounting {
namespace {

/// Utilisation at or above this is reported as saturated: in-flight counts
/// stop growing at capacity, so the demand beyond it is not visible here.
constexpr double kSaturated = 0.99;

struct PoolKey {
  std::string region, gpu, model;
  bool operator<(const PoolKey& o) const {
    return std::tie(region, gpu, model) < std::tie(o.region, o.gpu, o.model);
  }
};

bool SharesModel(const config::Backend& a, const config::Backend& b) {
  for (const std::string& m : a.models)
    if (std::find(b.models.begin(), b.models.end(), m) != b.models.end()) return true;
  return false;
}

std::string CapacityText(const std::vector<size_t>& members, const config::Snapshot& cfg,
                         double mean) {
  bool same = std::all_of(members.begin(), members.end(), [&](size_t i) {
    return cfg.backends[i].capacity == cfg.backends[members.front()].capacity;
  });
  if (same) return absl::StrCat("capacity ", cfg.backends[members.front()].capacity, " each");
  return absl::StrFormat("mean capacity %.1f", mean);
}

PoolReport BuildPool(const PoolKey& key, const std::vector<size_t>& members,
                     const config::Snapshot& cfg, const std::vector<bool>& routable,
                     const UtilizationTracker& util, health::MonotonicTime now, double target) {
  PoolReport p;
  p.region = key.region;
  p.gpu = key.gpu;
  p.model = key.model;
  p.configured_backends = static_cast<uint32_t>(members.size());
  double capacity_sum = 0;
  for (size_t i : members) {
    capacity_sum += cfg.backends[i].capacity;
    if (i < routable.size() && routable[i]) ++p.routable_backends;
  }
  p.capacity_per_backend = capacity_sum / static_cast<double>(members.size());

  for (size_t w = 0; w < kUtilWindows; ++w) {
    double inflight = 0, offered = 0, covered = 0;
    for (size_t i : members) {
      BackendUsage u = util.Usage(cfg.backends[i].state_key(), static_cast<UtilWindow>(w), now);
      inflight += u.inflight_seconds;
      offered += u.offered_seconds;
      // The pool was observed for as long as its best-covered member: a
      // backend that left mid-window took its load with it, and that load
      // went to the others, so per-member means would count it twice.
      covered = std::max(covered, u.covered_seconds);
    }
    if (covered <= 0) continue;
    // No capacity on offer but load in flight: as full as it gets.
    p.utilization[w] = offered > 0 ? inflight / offered : (inflight > 0 ? 1.0 : 0.0);
    if (static_cast<UtilWindow>(w) == UtilWindow::k5m) p.mean_inflight_5m = inflight / covered;
  }

  std::string over =
      absl::StrCat(p.routable_backends, " backend", p.routable_backends == 1 ? "" : "s", " (",
                   CapacityText(members, cfg, p.capacity_per_backend), ")");
  if (!p.mean_inflight_5m) {
    p.desired_backends = std::max<uint32_t>(1, p.routable_backends);
    p.reason = absl::StrCat("no in-flight samples in the last 5m over ", over, " -> keep ",
                            p.desired_backends);
    return p;
  }
  double demand = *p.mean_inflight_5m;
  p.desired_backends = DesiredBackends(demand, p.capacity_per_backend, target);
  double reach = demand / (p.desired_backends * p.capacity_per_backend);
  double util5 = *p.utilization[static_cast<size_t>(UtilWindow::k5m)];
  p.reason = absl::StrFormat(
      "5m utilization %.2f (mean in-flight %.1f) over %s -> %u backend%s%s "
      "reach%s %.2f <= target %.2f",
      util5, demand, over, p.desired_backends, p.desired_backends == 1 ? "" : "s",
      p.desired_backends == 1 && demand < target * p.capacity_per_backend ? " (the minimum)" : "",
      p.desired_backends == 1 ? "es" : "", reach, target);
  if (util5 >= kSaturated) {
    absl::StrAppend(&p.reason,
                    "; saturated: demand beyond capacity is not visible in in-flight counts "
                    "(watch 429 capacity_exhausted), so this is a lower bound");
  }
  return p;
}

/// Reserved headroom (up to the target) that sat idle while on-demand or
/// spot backends of the same region and GPU type, serving a model the
/// reserved backend also serves, carried load: that load could have run on
/// capacity already paid for. Each paid backend's 5-minute mean in-flight is
/// laid onto compatible reserved headroom in config order; the reserved
/// share so covered, times its cost_per_hour, is the waste.
std::vector<ReservedIdle> BuildReservedIdle(const config::Snapshot& cfg,
                                            const std::vector<bool>& routable,
                                            const UtilizationTracker& util,
                                            health::MonotonicTime now, double target) {
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups;
  for (size_t i = 0; i < cfg.backends.size(); ++i) {
    const config::Backend& b = cfg.backends[i];
    groups[{cfg.regions[b.region_index].name, b.gpu}].push_back(i);
  }
  std::vector<ReservedIdle> out;
  for (const auto& [key, members] : groups) {
    std::vector<size_t> reserved;
    for (size_t i : members)
      if (cfg.backends[i].tier == config::Tier::kReserved) reserved.push_back(i);
    if (reserved.empty()) continue;
    ReservedIdle idle;
    idle.region = key.first;
    idle.gpu = key.second;
    // Headroom in streams, and streams taken from paid backends.
    std::vector<double> headroom(reserved.size(), 0), taken(reserved.size(), 0);
    std::vector<double> util5(reserved.size(), 0);
    for (size_t k = 0; k < reserved.size(); ++k) {
      size_t i = reserved[k];
      BackendUsage u = util.Usage(cfg.backends[i].state_key(), UtilWindow::k5m, now);
      util5[k] = u.utilization();
      bool up = i < routable.size() && routable[i];
      if (up && u.has_data())
        headroom[k] = std::max(0.0, target * cfg.backends[i].capacity - u.mean_inflight());
    }
    for (size_t i : members) {
      const config::Backend& paid = cfg.backends[i];
      if (paid.tier == config::Tier::kReserved) continue;
      double load = util.Usage(paid.state_key(), UtilWindow::k5m, now).mean_inflight();
      for (size_t k = 0; k < reserved.size() && load > 0; ++k) {
        if (!SharesModel(paid, cfg.backends[reserved[k]])) continue;
        double take = std::min(load, headroom[k]);
        headroom[k] -= take;
        taken[k] += take;
        load -= take;
      }
    }
    for (size_t k = 0; k < reserved.size(); ++k) {
      const config::Backend& b = cfg.backends[reserved[k]];
      ReservedIdleBackend r;
      r.name = b.name;
      r.utilization_5m = util5[k];
      r.idle_share = taken[k] / std::max<uint32_t>(1, b.capacity);
      r.dollars_per_hour = r.idle_share * b.cost_per_hour;
      idle.dollars_per_hour += r.dollars_per_hour;
      idle.backends.push_back(std::move(r));
    }
    out.push_back(std::move(idle));
  }
  return out;
}

}  // namespace

uint32_t DesiredBackends(double mean_inflight, double capacity, double target) {
  if (!(mean_inflight > 0) || !(capacity > 0) || !(target > 0)) return 1;
  double need = mean_inflight / (target * capacity);
  // 1e-9 absorbs float noise, so exactly 4.0 backends' worth stays 4.
  double n = std::ceil(need - 1e-9);
  if (n > 1e6) return 1000000;
  return std::max<uint32_t>(1, static_cast<uint32_t>(n));
}

CapacityReport BuildCapacityReport(const config::Snapshot& cfg, const std::vector<bool>& routable,
                                   const UtilizationTracker& util, health::MonotonicTime now) {
  CapacityReport report;
  double target = cfg.capacity.target_utilization;
  report.target_utilization = target;
  // A backend serving several models counts in each of its pools.
  std::map<PoolKey, std::vector<size_t>> pools;
  for (size_t i = 0; i < cfg.backends.size(); ++i) {
    const config::Backend& b = cfg.backends[i];
    for (const std::string& m : b.models)
      pools[PoolKey{cfg.regions[b.region_index].name, b.gpu, m}].push_back(i);
  }
  for (const auto& [key, members] : pools)
    report.pools.push_back(BuildPool(key, members, cfg, routable, util, now, target));
  report.reserved_idle = BuildReservedIdle(cfg, routable, util, now, target);
  return report;
}

CapacityReport BuildCapacityReport(const config::Snapshot& cfg,
                                   const std::vector<health::BackendStatePtr>& states,
                                   const UtilizationTracker& util, health::MonotonicTime now) {
  std::vector<bool> routable(cfg.backends.size(), false);
  int64_t now_ns = health::ToNanos(now);
  for (size_t i = 0; i < routable.size() && i < states.size(); ++i)
    routable[i] = states[i] != nullptr && states[i]->routable(now_ns);
  return BuildCapacityReport(cfg, routable, util, now);
}

}  // namespace geogate::accounting
