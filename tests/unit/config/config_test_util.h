// Helpers shared by the config tests: inline TOML with obvious line numbers,
// an injected environment, a scratch directory, and error matching.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>

#include "config/loader.h"

namespace geogate::config::testing {

inline EnvLookup FakeEnv(std::map<std::string, std::string> vars = {}) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

/// Drops the newline right after R"( so the first written line is line 1.
inline std::string_view Toml(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return text;
}

/// A fresh directory under $TMPDIR, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "geogate-config-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  /// Writes `content` to `relative` (creating directories); returns the full path.
  std::string Write(const std::string& relative, std::string_view content = "x\n") const {
    std::filesystem::path p = path_ / relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

/// Loads inline TOML as "test.toml" with relative paths under `base_dir`.
inline LoadResult Load(std::string_view text, const EnvLookup& env = FakeEnv(),
                       const std::string& base_dir = "/nonexistent-geogate-base") {
  return LoadString(Toml(text), "test.toml", base_dir, env);
}

inline std::string Describe(const LoadResult& r) {
  std::ostringstream out;
  for (const auto& e : r.errors)
    out << e.ToString() << "\n";
  for (const auto& w : r.warnings)
    out << "warning: " << w << "\n";
  return out.str();
}

/// True when some error sits at line:column and its message contains `text`.
inline bool HasError(const LoadResult& r, uint32_t line, uint32_t column, std::string_view text) {
  for (const auto& e : r.errors) {
    if (e.line == line && e.column == column && e.message.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

inline bool HasWarning(const LoadResult& r, std::string_view text) {
  for (const auto& w : r.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

/// Expects exactly one error, at line:column, containing `text`.
#define REQUIRE_ONLY_ERROR(result, want_line, want_column, want_text)       \
  do {                                                                      \
    const auto& r_ = (result);                                              \
    INFO(::geogate::config::testing::Describe(r_));                         \
    REQUIRE_FALSE(r_.ok());                                                 \
    REQUIRE(r_.errors.size() == 1);                                         \
    CHECK(r_.errors[0].line == (want_line));                                \
    CHECK(r_.errors[0].column == (want_column));                            \
    CHECK_THAT(r_.errors[0].message, Catch::Matchers::Contains(want_text)); \
  } while (0)

}  // namespace geogate::config::testing
