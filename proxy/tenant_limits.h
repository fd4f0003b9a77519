// Per-tenant request-rate and concurrency state, shared by all workers and
// kept across reloads by tenant name (a reload that changes the limits keeps
// the bucket's fill and the in-flight count).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "config/snapshot.h"
#include "routing/rate_limiter.h"

namespace geogate::proxy {

struct TenantState {
  TenantState(double rate, double burst) : limiter(rate, burst) {}
  routing::RateLimiter limiter;
  std::atomic<uint32_t> inflight{0};
};
using TenantStatePtr = std::shared_ptr<TenantState>;

/// Holds a tenant's concurrency slot for the request's life.
class TenantSlot {
 public:
  TenantSlot() = default;
  TenantSlot(const TenantSlot&) = delete;
  TenantSlot& operator=(const TenantSlot&) = delete;
  ~TenantSlot() {
    if (state_) state_->inflight.fetch_sub(1, std::memory_order_relaxed);
  }
  /// Takes a slot unless `max` (0: no limit) are taken. @return whether it did.
  bool Acquire(TenantState& s, uint32_t max) {
    uint32_t now = s.inflight.fetch_add(1, std::memory_order_relaxed) + 1;
    if (max != 0 && now > max) {
      s.inflight.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    state_ = &s;
    return true;
  }

 private:
  TenantState* state_ = nullptr;
};

class TenantLimits {
 public:
  /// One state per snapshot tenant, in order. Reload-time only.
  std::vector<TenantStatePtr> Bind(const config::Snapshot& snap);

 private:
  std::mutex mu_;
  absl::flat_hash_map<std::string, TenantStatePtr> states_;
};

/// The token bucket depth a tenant gets: `burst`, or max(1, rate) when unset.
double EffectiveBurst(const config::Tenant& t);

}  // namespace geogate::proxy
