// Process-wide state the workers share with the server. Everything here is
// thread-safe: atomics, or objects that do their own synchronisation.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "proxy/runtime_slot.h"

namespace geogate::health {
class HealthService;
class RetryBudget;
}  // namespace geogate::health

namespace geogate::observability {
class AccessLog;
}  // namespace geogate::observability

namespace geogate::proxy {

class ConnectionsPerIp;
class TenantLimits;
class Worker;

struct ServerShared {
  health::HealthService* health = nullptr;
  health::RetryBudget* retry_budget = nullptr;
  observability::AccessLog* access_log = nullptr;
  TenantLimits* tenant_limits = nullptr;
  /// The runtime new requests are decided under: stored before the server
  /// says a reload is applied.
  RuntimeSlot runtime;
  ConnectionsPerIp* connections_per_ip = nullptr;
  /// Every worker, by id; set before they start, never changed after.
  std::vector<Worker*> workers;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> open_connections{0};
  std::atomic<int64_t> active_requests{0};
  std::atomic<int64_t> active_streams{0};
};

}  // namespace geogate::proxy
