#include "tracing/trace_context.h"

#include <catch2/catch.hpp>

namespace geogate::tracing {
namespace {

constexpr std::string_view kValid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST_CASE("a valid version-00 traceparent parses into ids and flags") {
  auto ctx = ParseTraceparent(kValid);
  REQUIRE(ctx);
  CHECK(Hex(ctx->trace_id) == "4bf92f3577b34da6a3ce929d0e0e4736");
  CHECK(Hex(ctx->span_id) == "00f067aa0ba902b7");
  CHECK(ctx->flags == 1);
  CHECK(ctx->sampled());
  auto unsampled = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  REQUIRE(unsampled);
  CHECK_FALSE(unsampled->sampled());
}

TEST_CASE("format is the inverse of parse") {
  auto ctx = ParseTraceparent(kValid);
  REQUIRE(ctx);
  CHECK(FormatTraceparent(ctx->trace_id, ctx->span_id, ctx->flags) == kValid);
  std::string made = FormatTraceparent(TraceIdFrom(1, 2), SpanIdFrom(3), 0);
  CHECK(made == "00-00000000000000010000000000000002-0000000000000003-00");
  CHECK(made.size() == kTraceparentSize);
  CHECK(ParseTraceparent(made));
}

TEST_CASE("invalid traceparents are refused") {
  const char* bad[] = {
      "",
      "garbage",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",    // short flags
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",  // v00 with a tail
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   // upper case
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // zero trace id
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // zero span id
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version ff
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // separator
      "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",   // not hex
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n",
      "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  // later version, no '-'
  };
  for (const char* h : bad) {
    INFO(h);
    CHECK_FALSE(ParseTraceparent(h));
  }
}

TEST_CASE("a later version is read by its first four fields") {
  auto ctx = ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever");
  REQUIRE(ctx);
  CHECK(Hex(ctx->span_id) == "00f067aa0ba902b7");
  CHECK(ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
}

TEST_CASE("ids made from random bits are never all zero") {
  CHECK_FALSE(IsZero(TraceIdFrom(0, 0)));
  CHECK_FALSE(IsZero(SpanIdFrom(0)));
}

TEST_CASE("tracestate is forwarded only when well-formed and small") {
  CHECK(AcceptableTracestate("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"));
  CHECK_FALSE(AcceptableTracestate(""));
  CHECK_FALSE(AcceptableTracestate(std::string(513, 'a')));
  CHECK_FALSE(AcceptableTracestate("a=1\x01"));
  std::string many;
  for (int i = 0; i < 33; ++i)
    many += (i ? ",k" : "k") + std::to_string(i) + "=v";
  CHECK_FALSE(AcceptableTracestate(many));
}

}  // namespace
}  // namespace geogate::tracing
