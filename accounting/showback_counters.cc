#include "accounting/showback_counters.h"

namespace geogate::accounting {

void ShowbackCounters::Add(const ShowbackRecord& r) {
  std::string_view tenant = r.tenant.empty() ? std::string_view("none") : r.tenant;
  gpu_seconds.Add({tenant, r.backend, r.model}, r.gpu_seconds);
  cost.Add({tenant, r.backend, r.model}, r.cost);
}

void WriteShowbackCounters(observability::PromWriter& w, const ShowbackCounters& c) {
  static constexpr std::array<const char*, 3> kLabels{"tenant", "backend", "model"};
  w.Family("geogate_gpu_seconds_total", "counter",
           "GPU-seconds used: stream wall time / backend capacity, per tenant, backend and model.");
  w.Counter("geogate_gpu_seconds_total", kLabels, c.gpu_seconds);
  w.Family("geogate_cost_dollars_total", "counter",
           "Cost: GPU-seconds x cost_per_hour / 3600, per tenant, backend and model.");
  w.Counter("geogate_cost_dollars_total", kLabels, c.cost);
}

}  // namespace geogate::accounting
