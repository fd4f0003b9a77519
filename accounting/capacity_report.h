// Scaling signals from utilisation (docs/showback.md, "Scaling signal"):
// per pool (region, GPU type, model) the utilisation over 1/5/15 minutes,
// the routable backend count and the count that would bring the 5-minute
// utilisation to [capacity] target_utilization; per (region, GPU type) the
// dollars per hour of reserved capacity left idle while on-demand or spot
// backends of the same pool carried load. Pure over the snapshot, the
// backends' routability and a UtilizationTracker; capacity_export.h serves
// it as /admin/capacity JSON and as Prometheus gauges.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "accounting/capacity_utilization.h"
#include "config/snapshot.h"
#include "health/health_table.h"
#include "health/time_source.h"

namespace geogate::accounting {

struct PoolReport {
  std::string region;
  std::string gpu;
  std::string model;
  uint32_t configured_backends = 0;
  uint32_t routable_backends = 0;   // healthy and not ejected now
  double capacity_per_backend = 0;  // mean configured capacity in the pool
  /// In-flight / capacity on offer (routable), time-weighted, per
  /// UtilWindow; nullopt when the window holds no samples.
  std::array<std::optional<double>, kUtilWindows> utilization;
  /// Mean total in-flight of the pool over 5 minutes (nullopt: no samples).
  std::optional<double> mean_inflight_5m;
  uint32_t desired_backends = 1;
  std::string reason;
};

struct ReservedIdleBackend {
  std::string name;
  double utilization_5m = 0;  // in-flight / capacity
  double idle_share = 0;      // share of the backend idle while paid capacity carried load
  double dollars_per_hour = 0;
};

struct ReservedIdle {
  std::string region;
  std::string gpu;
  double dollars_per_hour = 0;
  std::vector<ReservedIdleBackend> backends;  // the routable reserved backends
};

struct CapacityReport {
  double target_utilization = 0.7;
  std::vector<PoolReport> pools;            // by region, gpu, model
  std::vector<ReservedIdle> reserved_idle;  // (region, gpu) with reserved backends
};

/// The desired backend count for a pool whose mean in-flight over the
/// window is `mean_inflight`, each backend holding `capacity` streams at
/// 100 %: the fewest backends whose utilisation would be at most `target`,
/// and at least 1 (a pool keeps one warm backend):
///   max(1, ceil(mean_inflight / (target * capacity)))
uint32_t DesiredBackends(double mean_inflight, double capacity, double target);

/// @param routable routable[i] for cfg.backends[i] (missing entries: false).
CapacityReport BuildCapacityReport(const config::Snapshot& cfg, const std::vector<bool>& routable,
                                   const UtilizationTracker& util, health::MonotonicTime now);
/// Same, reading routability from the live backend states.
CapacityReport BuildCapacityReport(const config::Snapshot& cfg,
                                   const std::vector<health::BackendStatePtr>& states,
                                   const UtilizationTracker& util, health::MonotonicTime now);

}  // namespace geogate::accounting
