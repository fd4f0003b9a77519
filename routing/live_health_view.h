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
  BackendObservation Observe(size_t backend) const override;

 private:
  std::span<const health::BackendStatePtr> states_;
  int64_t now_ns_;
};

/// The same conversion for one state (used by /admin/backends).
BackendObservation ObserveState(const health::BackendState& s, int64_t now_ns);

}  // namespace geogate::routing
