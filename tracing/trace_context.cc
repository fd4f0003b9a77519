#include "tracing/trace_context.h"

#include <algorithm>

#include "absl/strings/escaping.h"

namespace geogate::tracing {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is invalid in traceparent
}

// Decodes exactly 2*N lower-case hex digits.
template <size_t N>
bool DecodeHex(std::string_view text, std::array<uint8_t, N>& out) {
  if (text.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    int hi = HexDigit(text[2 * i]);
    int lo = HexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

void PutBytes(uint64_t v, uint8_t* out) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<uint8_t>(v & 0xff);
    v >>= 8;
  }
}

}  // namespace

bool IsZero(const TraceId& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}
bool IsZero(const SpanId& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

std::optional<TraceContext> ParseTraceparent(std::string_view h) {
  // version "-" trace-id "-" parent-id "-" trace-flags
  if (h.size() < kTraceparentSize) return std::nullopt;
  std::array<uint8_t, 1> version{};
  if (!DecodeHex(h.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
  if (h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
  // Version 00 has exactly these fields; a later version may append more
  // after a '-', which this reader does not know and skips.
  if (version[0] == 0 ? h.size() != kTraceparentSize
                      : h.size() > kTraceparentSize && h[kTraceparentSize] != '-')
    return std::nullopt;
  TraceContext ctx;
  std::array<uint8_t, 1> flags{};
  if (!DecodeHex(h.substr(3, 32), ctx.trace_id) || !DecodeHex(h.substr(36, 16), ctx.span_id) ||
      !DecodeHex(h.substr(53, 2), flags))
    return std::nullopt;
  if (IsZero(ctx.trace_id) || IsZero(ctx.span_id)) return std::nullopt;
  ctx.flags = flags[0];
  return ctx;
}

std::string Hex(const uint8_t* data, size_t size) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(data), size));
}

std::string FormatTraceparent(const TraceId& trace, const SpanId& span, uint8_t flags) {
  std::string out;
  out.reserve(kTraceparentSize);
  out += "00-";
  out += Hex(trace);
  out += '-';
  out += Hex(span);
  out += '-';
  out += Hex(&flags, 1);
  return out;
}

TraceId TraceIdFrom(uint64_t hi, uint64_t lo) {
  TraceId id;
  if (hi == 0 && lo == 0) lo = 1;
  PutBytes(hi, id.data());
  PutBytes(lo, id.data() + 8);
  return id;
}

SpanId SpanIdFrom(uint64_t bits) {
  SpanId id;
  PutBytes(bits == 0 ? 1 : bits, id.data());
  return id;
}

std::optional<std::string_view> AcceptableTracestate(std::string_view value) {
  if (value.empty() || value.size() > 512) return std::nullopt;
  size_t members = 1;
  for (char c : value) {
    if (c == ',') ++members;
    if (c < 0x20 || c > 0x7e) return std::nullopt;
  }
  if (members > 32) return std::nullopt;
  return value;
}

}  // namespace geogate::tracing
