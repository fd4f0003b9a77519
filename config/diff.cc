// RestartRequiredChanges: what a reload cannot apply in place. Sockets are
// bound once per worker with SO_REUSEPORT, so listeners, the admin address and
// the worker count are fixed for the life of the process (DESIGN.md §7).
// TLS certificate/key paths are not here: a reload re-reads them.
#include <vector>

#include "absl/strings/str_cat.h"
#include "config/loader.h"

namespace geogate::config {
namespace {

const char* OnOff(bool on) {
  return on ? "on" : "off";
}

}  // namespace

std::vector<std::string> RestartRequiredChanges(const Snapshot& running, const Snapshot& next) {
  std::vector<std::string> out;
  const auto& before = running.gateway.listeners;
  const auto& after = next.gateway.listeners;
  // Match by the parsed address, so "0.0.0.0:08080" and "0.0.0.0:8080" are
  // the same socket; repeated port-0 listeners pair up in order.
  std::vector<bool> matched(after.size(), false);
  for (const Listener& r : before) {
    const Listener* n = nullptr;
    for (size_t j = 0; j < after.size(); ++j) {
      if (!matched[j] && after[j].host == r.host && after[j].port == r.port) {
        matched[j] = true;
        n = &after[j];
        break;
      }
    }
    if (n == nullptr) {
      out.push_back(absl::StrCat("listener ", r.address, " was removed"));
      continue;
    }
    if (r.tls.has_value() != n->tls.has_value()) {
      out.push_back(
          absl::StrCat("listener ", r.address, " turned TLS ", OnOff(n->tls.has_value())));
    }
    if (r.proxy_protocol != n->proxy_protocol) {
      out.push_back(absl::StrCat("listener ", r.address, " turned proxy_protocol ",
                                 OnOff(n->proxy_protocol)));
    }
  }
  for (size_t j = 0; j < after.size(); ++j) {
    if (!matched[j]) out.push_back(absl::StrCat("listener ", after[j].address, " was added"));
  }
  const Admin& a = running.gateway.admin;
  const Admin& b = next.gateway.admin;
  if (a.host != b.host || a.port != b.port) {
    out.push_back(absl::StrCat("admin address changed from ", a.address, " to ", b.address));
  }
  if (running.gateway.workers != next.gateway.workers) {
    out.push_back(absl::StrCat("workers changed from ", running.gateway.workers, " to ",
                               next.gateway.workers));
  }
  return out;
}

}  // namespace geogate::config
