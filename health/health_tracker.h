// Health hysteresis as a pure value type (STYLE.md point 3): the verdict of a
// series of probe results, with separate thresholds to go down and to come
// back. No time, no I/O: the ProbeSession feeds it and acts on the verdict.
#pragma once

#include <cstdint>

#include "health/backend_state.h"

namespace geogate::health {

/// What one observation did to the verdict.
enum class Transition : uint8_t {
  kUnchanged,      // same state, nothing pending
  kChanged,        // the state flipped with this observation
  kChangePending,  // same state, but the streak is heading towards a flip
};
const char* TransitionName(Transition t);

class HealthTracker {
 public:
  /// @param healthy_threshold consecutive successes to return from kUnhealthy.
  /// @param unhealthy_threshold consecutive failures to leave kHealthy.
  /// Zero thresholds are treated as 1.
  HealthTracker(uint32_t healthy_threshold, uint32_t unhealthy_threshold);

  /// Records one probe result. From kUnknown the first result decides at once:
  /// a new backend takes traffic after its first successful probe and is
  /// unhealthy after its first failure.
  Transition observe(bool ok);

  /// Records a failure that proves the backend is down (connection refused):
  /// a healthy or unknown backend becomes unhealthy at once; an unhealthy one
  /// restarts its count of successes. It then needs `healthy_threshold`
  /// successes to come back, as after any other fall.
  Transition HardFailure();

  /// New thresholds (reload). A streak in progress keeps its count.
  void SetThresholds(uint32_t healthy_threshold, uint32_t unhealthy_threshold);

  HealthState state() const { return state_; }
  /// True while the streak of results disagrees with the state.
  bool changing() const { return streak_ > 0; }
  /// Results in a row that disagree with the state (0 when none).
  uint32_t streak() const { return streak_; }
  uint32_t healthy_threshold() const { return healthy_threshold_; }
  uint32_t unhealthy_threshold() const { return unhealthy_threshold_; }

 private:
  HealthState state_ = HealthState::kUnknown;
  uint32_t streak_ = 0;
  uint32_t healthy_threshold_;
  uint32_t unhealthy_threshold_;
};

}  // namespace geogate::health
