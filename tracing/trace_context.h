// W3C Trace Context (https://www.w3.org/TR/trace-context/): the ids of a
// trace and a span, and the `traceparent` header that carries them. Version
// 00 is parsed strictly; a later version is read by its first four fields as
// the spec asks. Anything else is invalid, and an invalid header is ignored.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace geogate::tracing {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

inline constexpr uint8_t kSampledFlag = 0x01;
/// "00-" + 32 + "-" + 16 + "-" + 2.
inline constexpr size_t kTraceparentSize = 55;

struct TraceContext {
  TraceId trace_id{};
  SpanId span_id{};  // the caller's span: the parent of ours
  uint8_t flags = 0;
  bool sampled() const { return (flags & kSampledFlag) != 0; }
};

bool IsZero(const TraceId& id);
bool IsZero(const SpanId& id);

/// @return the context, or nullopt when `header` is not a valid traceparent
/// (wrong shape, upper-case hex, all-zero ids, version ff).
std::optional<TraceContext> ParseTraceparent(std::string_view header);

/// "00-<trace>-<span>-<flags>", kTraceparentSize characters.
std::string FormatTraceparent(const TraceId& trace, const SpanId& span, uint8_t flags);

/// Lower-case hex, as OTLP/JSON and traceparent write ids.
std::string Hex(const uint8_t* data, size_t size);
template <size_t N>
std::string Hex(const std::array<uint8_t, N>& id) {
  return Hex(id.data(), N);
}

/// Ids from random bits (never all zero).
TraceId TraceIdFrom(uint64_t hi, uint64_t lo);
SpanId SpanIdFrom(uint64_t bits);

/// A `tracestate` value fit to forward with the trace: at most 512
/// characters and 32 list-members of visible ASCII (W3C §3.3). Anything else
/// is dropped (nullopt), never forwarded.
std::optional<std::string_view> AcceptableTracestate(std::string_view value);

}  // namespace geogate::tracing
