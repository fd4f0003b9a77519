// JSON string literals written straight into a buffer: the escaper of the
// one hand-written JSON writer, the access log's (observability/
// access_log.cc), which is on the request path. Every other JSON text goes
// through Boost.JSON (common/json.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace geogate::common {

/// The longest text WriteJsonString writes for `s`: every byte a \u00XX
/// escape, and the quotes.
constexpr size_t JsonStringBound(std::string_view s) {
  return 6 * s.size() + 2;
}

/// Writes `s` as a JSON string literal (quotes included) at `dst`, which
/// has room for JsonStringBound(s) bytes. @return the end of what it wrote.
char* WriteJsonString(char* dst, std::string_view s);

}  // namespace geogate::common
