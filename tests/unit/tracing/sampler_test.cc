#include "tracing/sampler.h"

#include <catch2/catch.hpp>

#include <cmath>

#include "common/splitmix64.h"

namespace geogate::tracing {
namespace {

TraceContext Parent(bool sampled) {
  TraceContext p;
  p.trace_id = TraceIdFrom(7, 8);
  p.span_id = SpanIdFrom(9);
  p.flags = sampled ? kSampledFlag : 0;
  return p;
}

TEST_CASE("a parent's sampled flag decides, whatever the ratio") {
  for (double ratio : {0.0, 0.5, 1.0}) {
    Sampler s(ratio);
    TraceContext yes = Parent(true), no = Parent(false);
    CHECK(s.Sample(&yes, yes.trace_id));
    CHECK_FALSE(s.Sample(&no, no.trace_id));
  }
}

TEST_CASE("a root trace is sampled at the ratio") {
  uint64_t rng = 42;
  for (double ratio : {0.0, 0.1, 0.5, 1.0}) {
    Sampler s(ratio);
    int sampled = 0;
    constexpr int kN = 20000;
    for (int i = 0; i < kN; ++i)
      sampled += s.Sample(nullptr, TraceIdFrom(SplitMix64(rng), SplitMix64(rng))) ? 1 : 0;
    INFO(ratio);
    CHECK(std::abs(static_cast<double>(sampled) / kN - ratio) < 0.02);
    if (ratio == 0.0) CHECK(sampled == 0);
    if (ratio == 1.0) CHECK(sampled == kN);
  }
}

TEST_CASE("the decision for a trace id is always the same") {
  Sampler s(0.5);
  TraceId id = TraceIdFrom(1, 0x7fffffffffffffffULL);
  CHECK(s.Sample(nullptr, id));
  CHECK(s.Sample(nullptr, id));
  CHECK_FALSE(s.Sample(nullptr, TraceIdFrom(1, 0x8000000000000001ULL)));
}

TEST_CASE("out-of-range ratios are clamped") {
  CHECK_FALSE(Sampler(-1).Sample(nullptr, TraceIdFrom(0, 1)));
  CHECK(Sampler(2).Sample(nullptr, TraceIdFrom(0, ~0ULL)));
}

}  // namespace
}  // namespace geogate::tracing
