// geogate.toml -> validated, immutable Snapshot. Every problem is collected
// (not just the first) and points at the offending value's line and column,
// or at its table's line when a key is missing (DESIGN.md §5).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/snapshot.h"

namespace geogate::config {

struct ConfigError {
  std::string file;
  uint32_t line = 0;  // 1-based; 0 when the error is about the whole file
  uint32_t column = 0;
  std::string message;
  /// "file:line:col: message" (or "file: message" without a position).
  std::string ToString() const;
};

struct LoadResult {
  SnapshotConstPtr snapshot;  // null when there is any error
  std::vector<ConfigError> errors;
  std::vector<std::string> warnings;  // accepted but worth an operator's look
  bool ok() const { return snapshot != nullptr; }
};

/// Looks up an environment variable (injected so tests need no real env).
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

/// What a load asks of the world besides the text.
enum class LoadMode : uint8_t {
  /// What start-up needs: every file named exists and is readable (or, for
  /// output files, its directory exists) and every api_key_env is set.
  kFull,
  /// `geogate --check --syntax-only`: schema, types, ranges and references
  /// only, so CI can lint a config without its secrets, certificates or
  /// databases. The snapshot is for reporting; it must not be run.
  kSyntaxOnly,
};

/// Start of the message of an error that is geogate's bug rather than the
/// file's: an exception escaped a section reader or validation. The file is
/// refused like any bad file (a reload must never crash the gateway).
inline constexpr std::string_view kInternalLoadError = "internal error while loading: ";

/// Reads, parses and validates `path`. Relative paths inside the file are
/// resolved against the file's directory.
LoadResult LoadFile(const std::string& path, const EnvLookup& env = ProcessEnv(),
                    LoadMode mode = LoadMode::kFull);

/// Same, from text already in memory. `source_name` is used in error
/// messages; `base_dir` resolves relative paths.
LoadResult LoadString(std::string_view text, const std::string& source_name,
                      const std::string& base_dir, const EnvLookup& env = ProcessEnv(),
                      LoadMode mode = LoadMode::kFull);

/// Differences between a running snapshot and a new one that only take effect
/// after a restart (listener addresses/TLS presence/proxy_protocol, admin
/// address, worker count), as human-readable sentences. Empty when none.
std::vector<std::string> RestartRequiredChanges(const Snapshot& running, const Snapshot& next);

/// How a reload changes the backend set. Identity is Backend::state_key():
/// a backend that keeps its name but changes its URL is `replaced` (fresh
/// health), one whose other settings change is `updated` (state carries over).
struct BackendChanges {
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> replaced;
  std::vector<std::string> updated;
  size_t unchanged = 0;
  bool empty() const {
    return added.empty() && removed.empty() && replaced.empty() && updated.empty();
  }
  /// "2 added (a, b), 1 removed (c), ..." for the reload log line.
  std::string Summary() const;
};
BackendChanges DiffBackends(const Snapshot& running, const Snapshot& next);

}  // namespace geogate::config
