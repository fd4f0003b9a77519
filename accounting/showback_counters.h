// Lifetime counters of GPU-seconds and cost per (tenant, backend, model),
// for /metrics. One per worker like WorkerMetrics (only its own thread adds;
// a scrape merges copies), so the lead can hold it as a WorkerMetrics member
// and merge it in WorkerMetrics::MergeInto.
#pragma once

#include "accounting/showback_record.h"
#include "observability/metrics.h"

namespace geogate::accounting {

struct ShowbackCounters {
  observability::CounterVec<3> gpu_seconds;  // geogate_gpu_seconds_total{tenant,backend,model}
  observability::CounterVec<3> cost;         // geogate_cost_dollars_total{tenant,backend,model}

  /// Counts one finished request; tenant "" is labelled "none", like
  /// geogate_requests_total.
  void Add(const ShowbackRecord& r);
  void MergeInto(ShowbackCounters& out) const {
    gpu_seconds.MergeInto(out.gpu_seconds);
    cost.MergeInto(out.cost);
  }
};

/// Writes geogate_gpu_seconds_total and geogate_cost_dollars_total.
void WriteShowbackCounters(observability::PromWriter& w, const ShowbackCounters& c);

}  // namespace geogate::accounting
