// What a worker needs to trace requests under one config generation: the
// sampler and the queue finished spans go to. Built by the server with each
// runtime (null when [tracing] is off); the queue outlives reloads.
#pragma once

#include <chrono>
#include <memory>

#include "tracing/sampler.h"
#include "tracing/span_batcher.h"

namespace geogate::tracing {

class Tracer {
 public:
  Tracer(double sampling_ratio, std::shared_ptr<SpanBatcher> sink)
      : sampler_(sampling_ratio), sink_(std::move(sink)) {}

  const Sampler& sampler() const { return sampler_; }
  /// Hands a finished span to the exporter; dropped (and counted) when the
  /// queue is full.
  void Submit(Span&& span, std::chrono::steady_clock::time_point now) const {
    sink_->Add(std::move(span), now);
  }

 private:
  Sampler sampler_;
  std::shared_ptr<SpanBatcher> sink_;
};

using TracerConstPtr = std::shared_ptr<const Tracer>;

}  // namespace geogate::tracing
