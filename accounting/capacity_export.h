// The capacity report as the admin endpoint and /metrics serve it. The
// metric names and labels are a contract: alert rules and autoscalers
// (docs/showback.md) select on them.
#pragma once

#include <string>

#include "accounting/capacity_report.h"
#include "observability/metrics.h"

namespace geogate::accounting {

/// The /admin/capacity body:
/// `{"target_utilization":..,"pools":[..],"reserved_idle":[..]}`.
std::string CapacityJson(const CapacityReport& report);

/// Writes geogate_pool_utilization{region,gpu,model,window} (windows with
/// samples only), geogate_pool_desired_backends{region,gpu,model},
/// geogate_pool_backends{region,gpu,model} (routable now) and
/// geogate_reserved_idle_cost_dollars_per_hour{region,gpu}.
void WriteCapacityMetrics(observability::PromWriter& w, const CapacityReport& report);

}  // namespace geogate::accounting
