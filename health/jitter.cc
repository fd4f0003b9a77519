#include "health/jitter.h"

#include <algorithm>

namespace geogate::health {

Millis InitialDelay(Millis interval, uint64_t random) {
  if (interval.count() <= 0) return Millis(0);
  // Modulo bias over a 64-bit value is below 2^-40 for any sane interval.
  return Millis(static_cast<int64_t>(random % static_cast<uint64_t>(interval.count())));
}

Millis JitteredInterval(Millis interval, uint32_t jitter_percent, uint64_t random) {
  const int64_t base = std::max<int64_t>(0, interval.count());
  const int64_t spread = base * std::min<uint32_t>(jitter_percent, 100) / 100;
  int64_t wait = base;
  if (spread > 0) {
    // Uniform over the 2*spread+1 whole milliseconds in [base-spread, base+spread].
    wait = base - spread + static_cast<int64_t>(random % static_cast<uint64_t>(2 * spread + 1));
  }
  return Millis(std::max<int64_t>(1, wait));
}

}  // namespace geogate::health
