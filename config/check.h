// `geogate --check [--syntax-only] --config FILE`: validate a config file the
// way start-up would, and say so in a form both people and scripts can read.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "config/loader.h"

namespace geogate::config {

/// Opens the files a loaded snapshot names the way start-up opens them and
/// returns what is wrong, each at the key that names the file. The binary
/// passes server::CheckNamedFiles (geo database, TLS pairs, CA files), the
/// same code start-up and reload use; config/ itself opens none of them.
using FileOpener =
    std::function<std::vector<ConfigError>(const Snapshot& snap, const std::string& config_file)>;

struct CheckOptions {
  EnvLookup env = ProcessEnv();
  /// Schema and values only: no file named by the config is looked at and
  /// no api_key_env needs to be set (LoadMode::kSyntaxOnly).
  bool syntax_only = false;
  /// Called after a clean load unless `syntax_only`; may be empty.
  FileOpener open_files;
};

/// Loads `path` and reports: every error to `err` as "file:line:col: message",
/// every warning to `err` as "file: warning: message", and on success a
/// one-line summary to `out`. Returns the process exit code: 0 valid, 1 not.
int RunCheck(const std::string& path, std::ostream& out, std::ostream& err,
             const CheckOptions& options);

/// The same with `env` and nothing opened beyond what the loader checks.
int RunCheck(const std::string& path, std::ostream& out, std::ostream& err,
             const EnvLookup& env = ProcessEnv());

}  // namespace geogate::config
