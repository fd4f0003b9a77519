#include "health/backend_state.h"

#include <functional>

namespace geogate::health {

uint64_t ModelKey(std::string_view canonical_name) {
  uint64_t h = std::hash<std::string_view>{}(canonical_name);
  return h == 0 ? 1 : h;
}

ModelTtft* BackendState::ClaimModelSlot(uint64_t key) {
  for (ModelTtft& slot : model_ttft) {
    uint64_t have = slot.key.load(std::memory_order_acquire);
    if (have == key) return &slot;
    if (have != 0) continue;
    // Free: claim it, unless another worker just claimed it (for this model
    // or another; then look on).
    if (slot.key.compare_exchange_strong(have, key, std::memory_order_acq_rel) || have == key)
      return &slot;
  }
  return nullptr;
}

const ModelTtft* BackendState::FindModelSlot(uint64_t key, bool* all_taken) const {
  bool taken = true;
  for (const ModelTtft& slot : model_ttft) {
    uint64_t have = slot.key.load(std::memory_order_acquire);
    if (have == key) return &slot;
    if (have == 0) {
      taken = false;
      break;  // slots are claimed in order: no later one holds the key
    }
  }
  if (all_taken) *all_taken = taken;
  return nullptr;
}

void BackendState::ResetTtft() {
  ttft_ewma_us.store(-1, std::memory_order_relaxed);
  ttft_at_ns.store(0, std::memory_order_relaxed);
  for (ModelTtft& slot : model_ttft) {
    slot.ewma_us.store(-1, std::memory_order_relaxed);
    slot.at_ns.store(0, std::memory_order_relaxed);
  }
}

const char* HealthStateName(HealthState s) {
  switch (s) {
    case HealthState::kUnknown:
      return "unknown";
    case HealthState::kHealthy:
      return "healthy";
    case HealthState::kUnhealthy:
      return "unhealthy";
  }
  return "unknown";
}

const char* FailureReasonName(FailureReason r) {
  switch (r) {
    case FailureReason::kNone:
      return "none";
    case FailureReason::kConnectRefused:
      return "connect_refused";
    case FailureReason::kConnectTimeout:
      return "connect_timeout";
    case FailureReason::kProbeTimeout:
      return "probe_timeout";
    case FailureReason::kBadStatus:
      return "bad_status";
    case FailureReason::kTlsError:
      return "tls_error";
    case FailureReason::kReset:
      return "reset";
    case FailureReason::kUpstream5xx:
      return "upstream_5xx";
    case FailureReason::kFirstTokenTimeout:
      return "first_token_timeout";
    case FailureReason::kStreamIdle:
      return "stream_idle";
    case FailureReason::kEjected:
      return "ejected";
    case FailureReason::kProtocolError:
      return "protocol_error";
    case FailureReason::kCount:
      break;
  }
  return "unknown";
}

}  // namespace geogate::health
