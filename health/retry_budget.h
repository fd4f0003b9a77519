// The process-wide retry budget: retries may not grow into a storm when a
// region fails. A retry is allowed while the retries in progress number fewer
// than max(retry_budget_min, retry_budget_percent % of the requests in
// progress). Lock-free; every worker shares one RetryBudget.
#pragma once

#include <atomic>
#include <cstdint>

#include "config/snapshot.h"
#include "health/backend_state.h"

namespace geogate::health {

/// True when moving a request that failed with `reason` to the next backend
/// is rerouting, not amplification, so the budget does not apply: the
/// backend refused the connection, dropped it before any response byte
/// (reset or closed: it crashed or was killed), or the health checks took it
/// out while the request waited. None of these put work on the pool that it
/// would not have carried anyway. Timeouts and 5xx answers, the signs of an
/// overloaded backend whose retries would pile onto the rest, do count.
bool IsFreeReroute(FailureReason reason);

class RetryBudget {
 public:
  /// Holds one active request; releases it when destroyed. Move-only.
  class RequestGuard {
   public:
    RequestGuard() = default;
    RequestGuard(RequestGuard&& o) noexcept : budget_(o.budget_) { o.budget_ = nullptr; }
    RequestGuard& operator=(RequestGuard&& o) noexcept;
    RequestGuard(const RequestGuard&) = delete;
    RequestGuard& operator=(const RequestGuard&) = delete;
    ~RequestGuard() { reset(); }
    void reset();

   private:
    friend class RetryBudget;
    explicit RequestGuard(RetryBudget* b) : budget_(b) {}
    RetryBudget* budget_ = nullptr;
  };

  /// Holds one active retry when granted (operator bool); releases it when
  /// destroyed. Move-only.
  class RetryGuard {
   public:
    RetryGuard() = default;
    RetryGuard(RetryGuard&& o) noexcept : budget_(o.budget_) { o.budget_ = nullptr; }
    RetryGuard& operator=(RetryGuard&& o) noexcept;
    RetryGuard(const RetryGuard&) = delete;
    RetryGuard& operator=(const RetryGuard&) = delete;
    ~RetryGuard() { reset(); }
    void reset();
    explicit operator bool() const { return budget_ != nullptr; }

   private:
    friend class RetryBudget;
    explicit RetryGuard(RetryBudget* b) : budget_(b) {}
    RetryBudget* budget_ = nullptr;
  };

  explicit RetryBudget(uint32_t percent = 20, uint32_t min = 3) { configure(percent, min); }
  /// New limits (reload); retries in progress keep their slots.
  void configure(uint32_t percent, uint32_t min);
  void configure(const config::Upstream& upstream) {
    configure(upstream.retry_budget_percent, upstream.retry_budget_min);
  }

  /// Counts a request as active until the guard is destroyed.
  [[nodiscard]] RequestGuard StartRequest();
  /// Takes a retry slot if the budget allows one.
  /// @return a granted guard, or an empty one (counted in rejected_retries()).
  [[nodiscard]] RetryGuard TryRetry();

  /// The current limit on concurrent retries.
  uint32_t limit() const;
  uint32_t active_requests() const { return requests_.load(std::memory_order_relaxed); }
  uint32_t active_retries() const { return retries_.load(std::memory_order_relaxed); }
  uint64_t rejected_retries() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> percent_{20};
  std::atomic<uint32_t> min_{3};
  std::atomic<uint32_t> requests_{0};
  std::atomic<uint32_t> retries_{0};
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace geogate::health
