#include "config/diagnostics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace geogate::config {

std::string ConfigError::ToString() const {
  if (line == 0) return absl::StrCat(file, ": ", message);
  return absl::StrCat(file, ":", line, ":", column, ": ", message);
}

void Diagnostics::Error(Pos at, std::string message) {
  errors_.push_back(ConfigError{file_, at.line, at.column, std::move(message)});
}

void Diagnostics::Warning(std::string message) {
  warnings_.push_back(std::move(message));
}

std::vector<ConfigError> Diagnostics::TakeErrors() {
  std::stable_sort(errors_.begin(), errors_.end(), [](const ConfigError& a, const ConfigError& b) {
    if (a.line != b.line) return a.line < b.line;
    return a.column < b.column;
  });
  return std::move(errors_);
}

}  // namespace geogate::config
