#include "proxy/tenant_limits.h"

#include <algorithm>

namespace geogate::proxy {

double EffectiveBurst(const config::Tenant& t) {
  return t.burst > 0 ? t.burst : std::max(1.0, t.requests_per_second);
}

std::vector<TenantStatePtr> TenantLimits::Bind(const config::Snapshot& snap) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TenantStatePtr> out;
  absl::flat_hash_map<std::string, TenantStatePtr> next;
  for (const config::Tenant& t : snap.tenants) {
    double rate = t.requests_per_second > 0 ? t.requests_per_second : 1;
    TenantStatePtr s;
    if (auto it = states_.find(t.name); it != states_.end()) {
      s = it->second;
      s->limiter.Configure(rate, EffectiveBurst(t));
    } else {
      s = std::make_shared<TenantState>(rate, EffectiveBurst(t));
    }
    next[t.name] = s;
    out.push_back(s);
  }
  states_ = std::move(next);
  return out;
}

}  // namespace geogate::proxy
