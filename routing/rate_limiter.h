// A lock-free token bucket for per-tenant requests_per_second, shared by all
// workers: the generic cell rate algorithm (GCRA) keeps one atomic, the
// "theoretical arrival time", and admits a request when it is no more than
// the burst tolerance ahead of now. Time is injected (nanoseconds), so it is
// tested in simulated time.
#pragma once

#include <atomic>
#include <cstdint>

namespace geogate::routing {

struct RateDecision {
  bool allowed = true;
  int64_t retry_after_ns = 0;  // when refused: wait at least this long
};

class RateLimiter {
 public:
  /// @param rate requests per second (> 0).
  /// @param burst requests admitted at once from idle (>= 1).
  RateLimiter(double rate, double burst) { Configure(rate, burst); }
  /// Changes rate and burst (reload) without losing the bucket's state.
  void Configure(double rate, double burst);
  RateDecision Acquire(int64_t now_ns);

 private:
  std::atomic<int64_t> tat_ns_{0};
  std::atomic<int64_t> interval_ns_{0};   // 1 / rate
  std::atomic<int64_t> tolerance_ns_{0};  // (burst - 1) / rate
};

}  // namespace geogate::routing
