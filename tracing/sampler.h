// Parent-based sampling: a request that carries a valid traceparent is
// recorded exactly when its caller sampled it; a trace the gateway starts is
// recorded for a `ratio` share of trace ids (OpenTelemetry's
// ParentBased(TraceIdRatioBased(ratio))).
#pragma once

#include <cstdint>

#include "tracing/trace_context.h"

namespace geogate::tracing {

class Sampler {
 public:
  /// `ratio` in [0, 1]; values outside are clamped.
  explicit Sampler(double ratio);

  /// @param parent the incoming context, null when the request had none.
  /// @param trace_id the trace the request belongs to (the parent's, or new).
  bool Sample(const TraceContext* parent, const TraceId& trace_id) const;

 private:
  // A root trace is sampled when the id's last 8 bytes, as a number, are
  // below this bound; all of them when ratio is 1.
  uint64_t bound_ = 0;
  bool all_ = false;
};

}  // namespace geogate::tracing
