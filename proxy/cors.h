// CORS for browser clients (Fetch standard, "CORS protocol"): what the
// gateway answers to a preflight and which Access-Control-* fields go on an
// actual response, under one listener's policy. Pure decisions over the
// policy and the request's fields; the request handler sends the answers.
#pragma once

#include <string>
#include <string_view>

#include "config/snapshot.h"

namespace geogate::proxy {

/// Sent with every allowed actual response so a page can read them: the
/// request id, the gateway's routing tags, and what the OpenAI SDKs read
/// to back off (Retry-After is not a CORS-safelisted response header).
inline constexpr std::string_view kCorsExposeHeaders =
    "x-request-id, x-geogate-edge, x-geogate-region, x-geogate-backend, "
    "x-geogate-residency-rule, retry-after, retry-after-ms, x-should-retry, "
    "openai-processing-ms, x-ratelimit-limit-requests, x-ratelimit-limit-tokens, "
    "x-ratelimit-remaining-requests, x-ratelimit-remaining-tokens, "
    "x-ratelimit-reset-requests, x-ratelimit-reset-tokens";

/// The methods a browser may use on the gateway.
inline constexpr std::string_view kCorsAllowMethods = "GET, HEAD, POST, OPTIONS";

/// The Access-Control-Allow-Origin value for a request whose Origin field
/// is `origin`: "*" when every origin is allowed, the origin itself when it
/// is listed, else empty (no CORS fields: the browser keeps the response
/// from the page). `policy` may be null (CORS off on the listener).
std::string_view CorsAllowOrigin(const config::Cors* policy, std::string_view origin);

enum class PreflightVerdict : uint8_t {
  kNotPreflight,  // not OPTIONS with Origin and Access-Control-Request-Method, or CORS off
  kAllowed,       // answer 204 with the Access-Control-* fields
  kRefused,       // the origin is not allowed: 403, no Access-Control-* fields
};

/// Whether an OPTIONS request is a CORS preflight the gateway answers.
/// `origin` and `request_method` are the Origin and
/// Access-Control-Request-Method fields (empty when absent).
PreflightVerdict DecidePreflight(const config::Cors* policy, bool is_options,
                                 std::string_view origin, std::string_view request_method);

/// Adds the fields of an actual response: Access-Control-Allow-Origin and
/// -Expose-Headers for an allowed origin, and Vary: Origin whenever the
/// answer depends on the origin (a listed set), so a shared cache keeps one
/// answer per origin. Nothing when `policy` is null. `Out` has set(name, value).
template <class Out>
void AddCorsResponseFields(Out& out, const config::Cors* policy, std::string_view origin) {
  if (policy == nullptr) return;
  std::string_view allow = CorsAllowOrigin(policy, origin);
  if (!allow.empty()) {
    out.set("Access-Control-Allow-Origin", allow);
    out.set("Access-Control-Expose-Headers", kCorsExposeHeaders);
  }
  if (!policy->any_origin) out.set("Vary", "Origin");
}

/// Adds the fields of an allowed preflight's 204: Allow-Origin, -Methods,
/// -Headers, -Max-Age and Vary: Origin. The answer is the same whatever
/// method and headers the preflight asks for: the browser compares them
/// with the lists.
template <class Out>
void AddPreflightFields(Out& out, const config::Cors& policy, std::string_view origin) {
  out.set("Access-Control-Allow-Origin", CorsAllowOrigin(&policy, origin));
  out.set("Access-Control-Allow-Methods", kCorsAllowMethods);
  if (!policy.allowed_headers.empty())
    out.set("Access-Control-Allow-Headers", policy.allowed_headers);
  out.set("Access-Control-Max-Age", std::to_string(policy.max_age_s));
  out.set("Vary", "Origin");
}

}  // namespace geogate::proxy
