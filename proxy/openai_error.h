// Every error the gateway itself produces, in OpenAI's shape
// {"error":{"message","type","code"}} with the status DESIGN.md §7 assigns.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace geogate::proxy {

enum class ErrorKind : uint8_t {
  kBadRequest,          // 400 bad_request
  kInvalidJson,         // 400 invalid_json
  kMissingModel,        // 400 missing_model
  kBadResidencyHeader,  // 400 bad_residency_header
  kInvalidApiKey,       // 401 invalid_api_key
  kOriginNotAllowed,    // 403 origin_not_allowed (a CORS preflight from an unlisted origin)
  kNotFound,            // 404 not_found
  kModelNotFound,       // 404 model_not_found
  kHeaderTimeout,       // 408 header_timeout
  kBodyTimeout,         // 408 body_timeout
  kBodyTooLarge,        // 413 body_too_large
  kEncodedBody,         // 415 unsupported_content_encoding (a body with a content coding)
  kRateLimited,         // 429 rate_limited
  kCapacityExhausted,   // 429 capacity_exhausted
  kBudgetExceeded,      // 429 budget_exceeded
  kHeadersTooLarge,     // 431 headers_too_large
  kResidencyDenied,     // 451 residency_denied
  kInternal,            // 500 internal_error
  kUpstreamFailed,      // 502 upstream_failed
  kNoCompliantBackend,  // 503 no_compliant_backend
  kDraining,            // 503 draining (the edge is shutting down)
  kConnectionLimit,     // 503 too_many_connections (max_connections, nothing idle)
  kIpConnectionLimit,   // 503 too_many_connections_per_ip
  kFirstTokenTimeout,   // 504 first_token_timeout
};

struct ErrorSpec {
  unsigned status;
  const char* type;
  const char* code;
};

ErrorSpec SpecOf(ErrorKind kind);

/// The JSON body for an error; `message` is escaped.
std::string ErrorBody(ErrorKind kind, std::string_view message);

/// The SSE event that ends a stream which failed after it started: one
/// `data:` line with the error object and the blank line that ends the event.
std::string StreamErrorEvent(std::string_view message);

/// The same for a Responses API stream, in that API's own event shape: an
/// `event: error` line, and data of `"type":"error"`, the `sequence_number`
/// that comes next in the stream and the same error object. Clients parse
/// Responses events by their type (the Vercel AI SDK's schema would reject
/// a bare error object), while OpenAI's SDKs raise on the `error` member.
std::string ResponsesStreamErrorEvent(std::string_view message, int64_t sequence_number);

}  // namespace geogate::proxy
