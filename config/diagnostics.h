// Collects every problem found while loading one config file, so the operator
// sees all of them in one `--check` run instead of fixing them one at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"

#include "config/loader.h"
#include "config/snapshot.h"

namespace geogate::config {

/// Debian's abseil has its own string_view (ABSL_OPTION_USE_STD_STRING_VIEW
/// 0) that does not convert implicitly from std::string_view; absl::StrCat
/// arguments that are std::string_view go through this.
inline absl::string_view AV(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

/// A 1-based line/column in the config file; {0, 0} means "the whole file".
struct Pos {
  uint32_t line = 0;
  uint32_t column = 0;
  operator SourcePos() const { return SourcePos{line, column}; }
};

class Diagnostics {
 public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}

  void Error(Pos at, std::string message);
  void Warning(std::string message);

  bool has_errors() const { return !errors_.empty(); }
  const std::string& file() const { return file_; }

  /// The errors ordered by position (whole-file errors first), so the output
  /// reads top to bottom like the file however the sections were visited.
  std::vector<ConfigError> TakeErrors();
  std::vector<std::string> TakeWarnings() { return std::move(warnings_); }

 private:
  std::string file_;
  std::vector<ConfigError> errors_;
  std::vector<std::string> warnings_;
};

}  // namespace geogate::config
