// Typed access to one TOML table with source positions: every accessor
// registers its key as part of the schema, reports type and range problems at
// the value, missing required keys at the table, and ReportUnknownKeys()
// flags whatever the schema did not ask for (with a "did you mean").
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "config/diagnostics.h"
#include "config/snapshot.h"

// Debian's libtomlplusplus is built with exceptions (symbols live in
// toml::v3::ex); parse errors arrive as toml::parse_error.
#if !TOML_EXCEPTIONS
#error "geogate expects toml++ built with TOML_EXCEPTIONS=1, as Debian ships it"
#endif

namespace geogate::config {

template <class T>
struct Located {
  T value;
  Pos pos;
};

enum class Presence : uint8_t { kOptional, kRequired };

Pos PosOf(const toml::node& node);
Pos PosOf(const toml::key& key);

/// "a string", "an integer", ... for messages.
const char* TypeName(const toml::node& node);

/// The candidate closest to `word` by edit distance when it is close enough
/// to be a plausible typo, else "".
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

/// Longest duration accepted for any *_ms key (about 24.8 days): keeps timer
/// arithmetic far from overflow.
inline constexpr int64_t kMaxMillis = std::numeric_limits<int32_t>::max();

template <class T>
constexpr int64_t MaxOf() {
  if constexpr (static_cast<uint64_t>(std::numeric_limits<T>::max()) >
                static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return std::numeric_limits<int64_t>::max();
  } else {
    return static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

class TableReader {
 public:
  /// `path` is the table's dotted name ("health", "gateway.limits"; empty for
  /// the document root); `array_element` marks an element of `[[path]]`.
  TableReader(const toml::table& table, std::string path, bool array_element, Diagnostics& diag);

  const std::string& label() const { return label_; }
  Pos pos() const { return PosOf(*table_); }
  Diagnostics& diag() const { return *diag_; }
  /// "'key' in [table]" (or "'key'" at the top level).
  std::string Describe(std::string_view key) const;

  /// Registers `key` and returns its node, or null when absent.
  const toml::node* Node(std::string_view key);

  std::optional<Located<std::string>> String(std::string_view key,
                                             Presence p = Presence::kOptional);
  std::optional<Located<bool>> Bool(std::string_view key, Presence p = Presence::kOptional);
  std::optional<Located<int64_t>> Integer(std::string_view key, int64_t min, int64_t max,
                                          Presence p = Presence::kOptional);
  /// A float or an integer. `min_exclusive` makes the lower bound strict.
  std::optional<Located<double>> Number(std::string_view key, double min, double max,
                                        bool min_exclusive = false,
                                        Presence p = Presence::kOptional);
  /// An array whose elements are all strings; a wrong element is reported and
  /// skipped.
  std::optional<std::vector<Located<std::string>>> StringArray(std::string_view key,
                                                               Presence p = Presence::kOptional);
  /// A sub-table, `[a.b]` or inline `b = { ... }`.
  std::optional<TableReader> Table(std::string_view key, Presence p = Presence::kOptional);
  /// The elements of an array of tables (`[[key]]`), each as a reader.
  std::vector<TableReader> TableArray(std::string_view key);

  // Setters that leave `out` at its default when the key is absent or wrong.
  void Set(std::string_view key, std::string& out);
  void Set(std::string_view key, bool& out);
  template <class T>
  void SetInt(std::string_view key, T& out, int64_t min, int64_t max = MaxOf<T>()) {
    if (auto v = Integer(key, min, max)) out = static_cast<T>(v->value);
  }
  /// A `*_ms` key; `min` is 0 where zero means "off"/"immediately", else 1.
  void SetMillis(std::string_view key, Millis& out, int64_t min);

  /// Reports every key present in the table that no accessor registered.
  void ReportUnknownKeys();

 private:
  void Missing(std::string_view key);
  void WrongType(const toml::node& node, std::string_view key, const char* expected);

  const toml::table* table_;
  std::string path_;
  std::string label_;  // "[health]", "[[backends]]", "" for the root
  Diagnostics* diag_;
  std::vector<std::string> known_;
};

}  // namespace geogate::config
