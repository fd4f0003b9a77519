// The production HealthView: reads each backend's BackendState atomics at
// decision time. Tests use a vector of BackendObservation instead.
#pragma once

#include <span>

#include "health/health_table.h"
#include "routing/decide.h"

namespace geogate::routing {

class LiveHealthView final : public HealthView {
 public:
  LiveHealthView(std::span<const health::BackendStatePtr> states, int64_t now_ns)
      : states_(states), now_ns_(now_ns) {}
  BackendObservation Observe(size_t backend, uint64_t model_key) const override;

 private:
  std::span<const health::BackendStatePtr> states_;
  int64_t now_ns_;
};

/// The same conversion for one state. `model_key` 0 (/admin/backends,
/// metrics) gives the backend-wide TTFT; a model's key gives that model's,
/// or no sample when it has none yet (the prior then stands in), or the
/// backend-wide one when every per-model slot belongs to another model.
BackendObservation ObserveState(const health::BackendState& s, int64_t now_ns,
                                uint64_t model_key = 0);

}  // namespace geogate::routing
