// `geogate --check --config FILE`: validate a config file the way a reload
// would, and say so in a form both people and scripts can read.
#pragma once

#include <ostream>
#include <string>

#include "config/loader.h"

namespace geogate::config {

/// Loads `path` and reports: every error to `err` as "file:line:col: message",
/// every warning to `err` as "file: warning: message", and on success a
/// one-line summary to `out`. Returns the process exit code: 0 valid, 1 not.
int RunCheck(const std::string& path, std::ostream& out, std::ostream& err,
             const EnvLookup& env = ProcessEnv());

}  // namespace geogate::config
