#include "routing/rate_limiter.h"

#include <algorithm>

namespace geogate::routing {

void RateLimiter::Configure(double rate, double burst) {
  if (rate <= 0) rate = 1e-9;
  burst = std::max(1.0, burst);
  int64_t interval = static_cast<int64_t>(1e9 / rate);
  interval_ns_.store(std::max<int64_t>(1, interval), std::memory_order_relaxed);
  tolerance_ns_.store(static_cast<int64_t>((burst - 1) * 1e9 / rate), std::memory_order_relaxed);
}

RateDecision RateLimiter::Acquire(int64_t now_ns) {
  int64_t interval = interval_ns_.load(std::memory_order_relaxed);
  int64_t tolerance = tolerance_ns_.load(std::memory_order_relaxed);
  int64_t tat = tat_ns_.load(std::memory_order_relaxed);
  for (;;) {
    int64_t start = std::max(tat, now_ns);
    if (start - now_ns > tolerance) return {false, start - now_ns - tolerance};
    if (tat_ns_.compare_exchange_weak(tat, start + interval, std::memory_order_relaxed))
      return {true, 0};
  }
}

}  // namespace geogate::routing
