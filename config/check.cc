#include "config/check.h"

namespace geogate::config {

int RunCheck(const std::string& path, std::ostream& out, std::ostream& err, const EnvLookup& env) {
  LoadResult result = LoadFile(path, env);
  for (const ConfigError& e : result.errors)
    err << e.ToString() << '\n';
  for (const std::string& w : result.warnings)
    err << path << ": warning: " << w << '\n';
  if (!result.ok()) return 1;
  const Snapshot& s = *result.snapshot;
  out << path << ": ok (" << s.regions.size() << " regions, " << s.backends.size() << " backends, "
      << s.models.size() << " models, " << s.residency.size() << " residency rules, "
      << s.tenants.size() << " tenants, hash " << s.hash.substr(0, 8) << "...)\n";
  return 0;
}

}  // namespace geogate::config
