// What a request pins for its whole life: the config snapshot, the live
// state of each of its backends, the geo database and the TLS contexts that
// were current when it started. Built by the Server on start and on every
// reload, published to the workers, never modified afterwards.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accounting/budget_tracker.h"
#include "config/snapshot.h"
#include "health/health_table.h"
#include "proxy/runtime_slot.h"
#include "proxy/tenant_limits.h"
#include "proxy/tls.h"
#include "routing/geo_resolver.h"
#include "tracing/tracer.h"

namespace geogate::proxy {

struct Runtime {
  config::SnapshotConstPtr config;
  /// backends[i] is the live state of config->backends[i].
  std::vector<health::BackendStatePtr> backends;
  routing::GeoResolverConstPtr geo;  // null = no database: every client unknown
  uint64_t geo_epoch = 0;
  /// Server TLS context per running listener (index of the listener set the
  /// process started with); null for plain listeners.
  std::vector<SslContextPtr> listener_tls;
  /// CORS policy per running listener (same index), pointing into `config`;
  /// null where CORS is off.
  std::vector<const config::Cors*> listener_cors;
  /// Client TLS context per backend (null for http:// backends).
  std::vector<SslContextPtr> backend_tls;
  /// tenants[i] is the rate/concurrency state of config->tenants[i].
  std::vector<TenantStatePtr> tenants;
  /// budgets[i] is the monthly spend of config->tenants[i].
  std::vector<accounting::BudgetStatePtr> budgets;
  /// [tracing]'s sampler and span queue; null when tracing is off.
  tracing::TracerConstPtr tracer;
  uint64_t generation = 0;

  /// The CORS policy of running listener `index`, null when it has none.
  const config::Cors* cors(size_t index) const {
    return index < listener_cors.size() ? listener_cors[index] : nullptr;
  }
};

}  // namespace geogate::proxy
