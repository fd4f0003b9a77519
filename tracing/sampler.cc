#include "tracing/sampler.h"

#include <cmath>

namespace geogate::tracing {

Sampler::Sampler(double ratio) {
  if (!(ratio > 0)) return;  // 0, negative and NaN: none
  if (ratio >= 1) {
    all_ = true;
    return;
  }
  bound_ = static_cast<uint64_t>(std::ldexp(ratio, 64));
}

bool Sampler::Sample(const TraceContext* parent, const TraceId& trace_id) const {
  if (parent != nullptr) return parent->sampled();
  if (all_) return true;
  uint64_t low = 0;
  for (size_t i = 8; i < 16; ++i)
    low = low << 8 | trace_id[i];
  return low < bound_;
}

}  // namespace geogate::tracing
