#include "proxy/cors.h"

#include <algorithm>

namespace geogate::proxy {

std::string_view CorsAllowOrigin(const config::Cors* policy, std::string_view origin) {
  if (policy == nullptr || origin.empty()) return {};
  if (policy->any_origin) return "*";
  // Byte for byte: the config holds each origin as browsers serialise it
  // (config/read_gateway.cc refuses any other spelling). A handful of
  // origins per listener: a scan beats a hash.
  const auto& list = policy->allowed_origins;
  return std::find(list.begin(), list.end(), origin) != list.end() ? origin : std::string_view();
}

PreflightVerdict DecidePreflight(const config::Cors* policy, bool is_options,
                                 std::string_view origin, std::string_view request_method) {
  // An OPTIONS without both fields is no preflight (Fetch standard, "CORS
  // preflight request"): it gets what any other request for the URL gets.
  if (policy == nullptr || !is_options || origin.empty() || request_method.empty())
    return PreflightVerdict::kNotPreflight;
  return CorsAllowOrigin(policy, origin).empty() ? PreflightVerdict::kRefused
                                                 : PreflightVerdict::kAllowed;
}

}  // namespace geogate::proxy
