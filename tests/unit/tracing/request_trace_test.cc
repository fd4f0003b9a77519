#include "tracing/request_trace.h"

#include <catch2/catch.hpp>

#include "testing/simulated_time.h"

namespace geogate::tracing {
namespace {

struct Counter {
  uint64_t next = 100;
  uint64_t operator()() { return next++; }
};

TEST_CASE("a request with a sampled parent continues its trace") {
  health::SimulatedTime time;
  auto sink = std::make_shared<SpanBatcher>(BatchOptions{});
  Tracer tracer(0.0, sink);  // the ratio does not matter with a parent
  auto parent = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  RequestTrace t(tracer, parent, "k=v", Counter{}, 1'000'000'000, time.monotonic());
  CHECK(t.sampled());
  CHECK(Hex(t.trace_id()) == "4bf92f3577b34da6a3ce929d0e0e4736");
  CHECK(t.tracestate() == "k=v");

  time.advance(health::Millis(5));
  Span routing = t.Child("geogate.route", SpanKind::kInternal, SpanIdFrom(7), time.monotonic());
  CHECK(routing.start_unix_ns == 1'005'000'000);
  CHECK(routing.parent_span_id == t.server_span_id());
  t.Finish(std::move(routing));

  t.BeginAttempt(SpanIdFrom(8), time.monotonic());
  auto upstream = ParseTraceparent(t.UpstreamTraceparent());
  REQUIRE(upstream);
  CHECK(upstream->trace_id == t.trace_id());
  CHECK(upstream->span_id == SpanIdFrom(8));
  CHECK(upstream->sampled());

  Span server = t.ServerSpan("POST");
  CHECK(server.parent_span_id == parent->span_id);
  CHECK(server.kind == SpanKind::kServer);
  t.Submit(std::move(server), time.monotonic());
  std::vector<Span> out = sink->TakeAny();
  REQUIRE(out.size() == 2);
  CHECK(out[0].name == "geogate.route");
  CHECK(out[1].span_id == t.server_span_id());
}

TEST_CASE("an unsampled trace propagates its context but records nothing") {
  health::SimulatedTime time;
  auto sink = std::make_shared<SpanBatcher>(BatchOptions{});
  Tracer tracer(1.0, sink);
  auto parent = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  RequestTrace t(tracer, parent, "", Counter{}, 0, time.monotonic());
  CHECK_FALSE(t.sampled());
  t.BeginAttempt(SpanIdFrom(8), time.monotonic());
  CHECK(t.UpstreamTraceparent().ends_with("-00"));
  t.Submit(t.ServerSpan("POST"), time.monotonic());
  CHECK(sink->queued() == 0);
}

TEST_CASE("a request without a parent starts a new root trace") {
  health::SimulatedTime time;
  auto sink = std::make_shared<SpanBatcher>(BatchOptions{});
  Tracer tracer(1.0, sink);
  RequestTrace t(tracer, std::nullopt, "ignored", Counter{}, 0, time.monotonic());
  CHECK(t.sampled());
  CHECK(t.trace_id() == TraceIdFrom(100, 101));
  CHECK(IsZero(t.ServerSpan("GET").parent_span_id));
  CHECK(t.tracestate().empty());
}

}  // namespace
}  // namespace geogate::tracing
