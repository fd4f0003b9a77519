// Debian's abseil is built with its own absl::string_view
// (ABSL_OPTION_USE_STD_STRING_VIEW 0), distinct from std::string_view, so
// views cross between the two explicitly.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace geogate {

inline absl::string_view ToAbsl(std::string_view s) {
  return {s.data(), s.size()};
}
inline std::string_view ToStd(absl::string_view s) {
  return {s.data(), s.size()};
}

/// A hash of label values for the per-worker counter maps, on each value's
/// absl::Hash (absl::Hash of a std::string_view falls back to std::hash,
/// libstdc++'s murmur loop, which was 3.7 % of a plain request's
/// instructions through the metrics and showback lookups).
inline size_t HashLabels(std::span<const std::string_view> labels, size_t seed = 0) {
  size_t h = seed ^ 0x9e3779b97f4a7c15ull;
  for (std::string_view s : labels)
    h = (h ^ absl::Hash<absl::string_view>{}(ToAbsl(s))) * 0x100000001b3ull;
  return h;
}

}  // namespace geogate
