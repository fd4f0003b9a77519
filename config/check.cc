#include "config/check.h"

namespace geogate::config {

int RunCheck(const std::string& path, std::ostream& out, std::ostream& err,
             const CheckOptions& options) {
  LoadResult result =
      LoadFile(path, options.env, options.syntax_only ? LoadMode::kSyntaxOnly : LoadMode::kFull);
  if (result.ok() && !options.syntax_only && options.open_files) {
    result.errors = options.open_files(*result.snapshot, path);
    if (!result.errors.empty()) result.snapshot = nullptr;
  }
  for (const ConfigError& e : result.errors)
    err << e.ToString() << '\n';
  for (const std::string& w : result.warnings)
    err << path << ": warning: " << w << '\n';
  if (!result.ok()) return 1;
  const Snapshot& s = *result.snapshot;
  out << path << ": ok (" << s.regions.size() << " regions, " << s.backends.size() << " backends, "
      << s.models.size() << " models, " << s.residency.size() << " residency rules, "
      << s.tenants.size() << " tenants, hash " << s.hash.substr(0, 8) << "...)"
      << (options.syntax_only ? "; syntax only: named files and environment variables not checked"
                              : "")
      << '\n';
  return 0;
}

int RunCheck(const std::string& path, std::ostream& out, std::ostream& err, const EnvLookup& env) {
  CheckOptions options;
  options.env = env;
  return RunCheck(path, out, err, options);
}

}  // namespace geogate::config
