// JSON string literals and fixed-point numbers written straight into a
// buffer: the escaper and number writer of the one hand-written JSON
// writer, the access log's (observability/access_log.cc), which is on the
// request path; the number writer also serves the routing decision's
// reason text. Every other JSON text goes through Boost.JSON (common/json.h).
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

/// The most WriteFixed writes.
inline constexpr size_t kFixedBytes = 64;

/// Writes `v` with `digits` decimals (at most kFixedBytes), the text of
/// printf's "%.<digits>f"; 0 when beyond 1e50. @return the end.
char* WriteFixed(char* dst, double v, int digits);

}  // namespace geogate::common
