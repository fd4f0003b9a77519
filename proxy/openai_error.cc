#include "proxy/openai_error.h"

#include "common/json.h"

namespace geogate::proxy {

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
    case ErrorKind::kOriginNotAllowed:
      return {403, "permission_error", "origin_not_allowed"};
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
    case ErrorKind::kEncodedBody:
      return {415, "invalid_request_error", "unsupported_content_encoding"};
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

static boost::json::object ErrorMember(std::string_view message, const char* type,
                                       const char* code) {
  return {{"message", message}, {"type", type}, {"code", code}};
}

static std::string ErrorObject(std::string_view message, const char* type, const char* code) {
  return common::SerializeJson(boost::json::object{{"error", ErrorMember(message, type, code)}});
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

std::string ResponsesStreamErrorEvent(std::string_view message, int64_t sequence_number) {
  std::string out = "event: error\ndata: ";
  out += common::SerializeJson(
      boost::json::object{{"type", "error"},
                          {"sequence_number", sequence_number},
                          {"error", ErrorMember(message, "upstream_error", "stream_interrupted")}});
  out += "\n\n";
  return out;
}

}  // namespace geogate::proxy
