// Debian's abseil is built with its own absl::string_view
// (ABSL_OPTION_USE_STD_STRING_VIEW 0), distinct from std::string_view, so
// views cross between the two explicitly.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace geogate {

inline absl::string_view ToAbsl(std::string_view s) { return {s.data(), s.size()}; }
inline std::string_view ToStd(absl::string_view s) { return {s.data(), s.size()}; }

}  // namespace geogate
