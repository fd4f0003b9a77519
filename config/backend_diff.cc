// DiffBackends: what a reload does to the backend set, for the reload log
// line and for tests of state carry-over (the HealthTable applies the same
// identity rule: Backend::state_key()).
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/loader.h"

namespace geogate::config {
namespace {

// Everything but the identity (name + url) that a reload may change.
auto Settings(const Backend& b) {
  return std::tie(b.region, b.models, b.gpu, b.provider, b.tier, b.capacity, b.cost_per_hour,
                  b.weight, b.vram_gb, b.api_key_env, b.api_key, b.ca_file, b.tls_verify);
}

}  // namespace

BackendChanges DiffBackends(const Snapshot& running, const Snapshot& next) {
  BackendChanges d;
  for (const Backend& n : next.backends) {
    auto it = running.backend_by_name.find(n.name);
    if (it == running.backend_by_name.end()) {
      d.added.push_back(n.name);
      continue;
    }
    const Backend& r = running.backends[it->second];
    if (r.url != n.url)
      d.replaced.push_back(n.name);
    else if (Settings(r) != Settings(n))
      d.updated.push_back(n.name);
    else
      d.unchanged++;
  }
  for (const Backend& r : running.backends)
    if (!next.backend_by_name.contains(r.name)) d.removed.push_back(r.name);
  return d;
}

std::string BackendChanges::Summary() const {
  std::vector<std::string> parts;
  auto add = [&](const char* what, const std::vector<std::string>& names) {
    if (!names.empty())
      parts.push_back(absl::StrCat(names.size(), " ", what, " (", absl::StrJoin(names, ", "), ")"));
  };
  add("added", added);
  add("removed", removed);
  add("replaced", replaced);
  add("updated", updated);
  parts.push_back(absl::StrCat(unchanged, " unchanged"));
  return absl::StrJoin(parts, ", ");
}

}  // namespace geogate::config
