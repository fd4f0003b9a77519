#include "gateway/openai_error.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace geogate::gateway {

ErrorSpec SpecOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadRequest:
      return {400, "invalid_request_error", "bad_request"};
    case ErrorKind::kInvalidJson:
      return {400, "invalid_request_error", "invalid_json"};
    case ErrorKind::kMissingModel:
      return {400, "invalid_request_error", "missing_model"};
    case ErrorKind::kBadResidencyHeader:
      return {400, "invalid_request_error", "bad_residency_header"};
    case ErrorKind::kInvalidApiKey:
      return {401, "authentication_error", "invalid_api_key"};
    case ErrorKind::kNotFound:
      return {404, "invalid_request_error", "not_found"};
    case ErrorKind::kModelNotFound:
      return {404, "invalid_request_error", "model_not_found"};
    case ErrorKind::kHeaderTimeout:
      return {408, "invalid_request_error", "header_timeout"};
    case ErrorKind::kBodyTimeout:
      return {408, "invalid_request_error", "body_timeout"};
    case ErrorKind::kBodyTooLarge:
      return {413, "invalid_request_error", "body_too_large"};
    case ErrorKind::kRateLimited:
      return {429, "rate_limit_error", "rate_limited"};
    case ErrorKind::kCapacityExhausted:
      return {429, "rate_limit_error", "capacity_exhausted"};
    case ErrorKind::kBudgetExceeded:
      return {429, "rate_limit_error", "budget_exceeded"};
    case ErrorKind::kHeadersTooLarge:
      return {431, "invalid_request_error", "headers_too_large"};
    case ErrorKind::kResidencyDenied:
      return {451, "residency_violation", "residency_denied"};
    case ErrorKind::kInternal:
      return {500, "server_error", "internal_error"};
    case ErrorKind::kUpstreamFailed:
      return {502, "upstream_error", "upstream_failed"};
    case ErrorKind::kNoCompliantBackend:
      return {503, "upstream_error", "no_compliant_backend"};
    case ErrorKind::kDraining:
      return {503, "upstream_error", "draining"};
    case ErrorKind::kConnectionLimit:
      return {503, "server_error", "too_many_connections"};
    case ErrorKind::kIpConnectionLimit:
      return {503, "server_error", "too_many_connections_per_ip"};
    case ErrorKind::kFirstTokenTimeout:
      return {504, "upstream_error", "first_token_timeout"};
  }
  return {500, "server_error", "internal_error"};
}

namespace {

constexpr uint64_t kBytes01 = 0x0101010101010101ull;
constexpr uint64_t kBytes80 = 0x8080808080808080ull;

// Whether any of the eight bytes of `w` needs an escape: a control
// character (< 0x20), a quote or a backslash. Exact (the usual "has a zero
// byte" test; bytes >= 0x80 never match).
constexpr bool NeedsEscape(uint64_t w) {
  uint64_t control = (w - 0x20 * kBytes01) & ~w & kBytes80;
  uint64_t q = w ^ ('"' * kBytes01);
  uint64_t quote = (q - kBytes01) & ~q & kBytes80;
  uint64_t b = w ^ ('\\' * kBytes01);
  uint64_t backslash = (b - kBytes01) & ~b & kBytes80;
  return (control | quote | backslash) != 0;
}

char* EscapeByte(char* dst, unsigned char u) {
  if (u >= 0x20 && u != '"' && u != '\\') {
    *dst++ = static_cast<char>(u);
    return dst;
  }
  *dst++ = '\\';
  switch (u) {
    case '"':
    case '\\':
      *dst++ = static_cast<char>(u);
      break;
    case '\n':
      *dst++ = 'n';
      break;
    case '\r':
      *dst++ = 'r';
      break;
    case '\t':
      *dst++ = 't';
      break;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const char esc[5] = {'u', '0', '0', kHex[u >> 4], kHex[u & 0xf]};
      std::memcpy(dst, esc, sizeof esc);
      dst += sizeof esc;
    }
  }
  return dst;
}

}  // namespace

// Eight bytes at a time while none needs an escape (nearly all of a log
// line): the byte-by-byte scan was the access log's largest cost.
char* WriteJsonString(char* dst, std::string_view s) {
  *dst++ = '"';
  const char* p = s.data();
  const char* end = p + s.size();
  while (end - p >= 8) {
    uint64_t w;
    std::memcpy(&w, p, sizeof w);
    if (!NeedsEscape(w)) {
      std::memcpy(dst, p, sizeof w);
      dst += sizeof w;
      p += sizeof w;
      continue;
    }
    for (int i = 0; i < 8; ++i)
      dst = EscapeByte(dst, static_cast<unsigned char>(*p++));
  }
  while (p < end)
    dst = EscapeByte(dst, static_cast<unsigned char>(*p++));
  *dst++ = '"';
  return dst;
}

void AppendJsonString(std::string& out, std::string_view s) {
  size_t old = out.size();
  out.resize(old + JsonStringBound(s));
  char* end = WriteJsonString(out.data() + old, s);
  out.resize(static_cast<size_t>(end - out.data()));
}

static std::string ErrorObject(std::string_view message, const char* type, const char* code) {
  std::string out;
  out.reserve(96 + message.size());
  out += R"({"error":{"message":)";
  AppendJsonString(out, message);
  out += R"(,"type":")";
  out += type;
  out += R"(","code":")";
  out += code;
  out += R"("}})";
  return out;
}

std::string ErrorBody(ErrorKind kind, std::string_view message) {
  ErrorSpec spec = SpecOf(kind);
  return ErrorObject(message, spec.type, spec.code);
}

std::string StreamErrorEvent(std::string_view message) {
  std::string out = "data: ";
  out += ErrorObject(message, "upstream_error", "stream_interrupted");
  out += "\n\n";
  return out;
}

}  // namespace geogate::gateway
