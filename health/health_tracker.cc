#include "health/health_tracker.h"

#include <algorithm>

namespace geogate::health {

const char* TransitionName(Transition t) {
  switch (t) {
    case Transition::kUnchanged:
      return "unchanged";
    case Transition::kChanged:
      return "changed";
    case Transition::kChangePending:
      return "change_pending";
  }
  return "unknown";
}

HealthTracker::HealthTracker(uint32_t healthy_threshold, uint32_t unhealthy_threshold) {
  SetThresholds(healthy_threshold, unhealthy_threshold);
}

void HealthTracker::SetThresholds(uint32_t healthy_threshold, uint32_t unhealthy_threshold) {
  healthy_threshold_ = std::max<uint32_t>(1, healthy_threshold);
  unhealthy_threshold_ = std::max<uint32_t>(1, unhealthy_threshold);
}

Transition HealthTracker::observe(bool ok) {
  const HealthState agreeing = ok ? HealthState::kHealthy : HealthState::kUnhealthy;
  if (state_ == HealthState::kUnknown) {
    state_ = agreeing;
    streak_ = 0;
    return Transition::kChanged;
  }
  if (state_ == agreeing) {
    // A result that agrees with the verdict breaks any streak against it.
    streak_ = 0;
    return Transition::kUnchanged;
  }
  const uint32_t threshold = ok ? healthy_threshold_ : unhealthy_threshold_;
  if (++streak_ >= threshold) {
    state_ = agreeing;
    streak_ = 0;
    return Transition::kChanged;
  }
  return Transition::kChangePending;
}

Transition HealthTracker::HardFailure() {
  streak_ = 0;
  if (state_ == HealthState::kUnhealthy) return Transition::kUnchanged;
  state_ = HealthState::kUnhealthy;
  return Transition::kChanged;
}

}  // namespace geogate::health
