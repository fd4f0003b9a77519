// Exponentially weighted moving average over integer samples (microseconds),
// the form kept in BackendState atomics. `alpha` is the weight of the new
// sample (config::Routing::ewma_alpha); a negative current value means "no
// sample yet", and the first sample is taken as is.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

namespace geogate::health {

/// @return the average after `sample`; `current` < 0 means no sample yet.
inline int64_t EwmaNext(int64_t current, int64_t sample, double alpha) {
  if (current < 0) return sample;
  alpha = std::clamp(alpha, 0.0, 1.0);
  return std::llround(alpha * static_cast<double>(sample) +
                      (1.0 - alpha) * static_cast<double>(current));
}

/// Folds `sample` into an atomic average shared by several writers (workers
/// updating one backend's TTFT). Lock-free compare-and-swap; a concurrent
/// update is retried, never lost.
inline void EwmaUpdate(std::atomic<int64_t>& average, int64_t sample, double alpha) {
  int64_t current = average.load(std::memory_order_relaxed);
  while (!average.compare_exchange_weak(current, EwmaNext(current, sample, alpha),
                                        std::memory_order_relaxed)) {
  }
}

}  // namespace geogate::health
