#include "health/retry_budget.h"

#include <algorithm>

namespace geogate::health {

bool IsFreeReroute(FailureReason reason) {
  return reason == FailureReason::kConnectRefused || reason == FailureReason::kReset ||
         reason == FailureReason::kProbeTimeout;
}

RetryBudget::RequestGuard& RetryBudget::RequestGuard::operator=(RequestGuard&& o) noexcept {
  if (this != &o) {
    reset();
    budget_ = o.budget_;
    o.budget_ = nullptr;
  }
  return *this;
}

void RetryBudget::RequestGuard::reset() {
  if (budget_ != nullptr) budget_->requests_.fetch_sub(1, std::memory_order_relaxed);
  budget_ = nullptr;
}

RetryBudget::RetryGuard& RetryBudget::RetryGuard::operator=(RetryGuard&& o) noexcept {
  if (this != &o) {
    reset();
    budget_ = o.budget_;
    o.budget_ = nullptr;
  }
  return *this;
}

void RetryBudget::RetryGuard::reset() {
  if (budget_ != nullptr) budget_->retries_.fetch_sub(1, std::memory_order_relaxed);
  budget_ = nullptr;
}

void RetryBudget::configure(uint32_t percent, uint32_t min) {
  percent_.store(percent, std::memory_order_relaxed);
  min_.store(min, std::memory_order_relaxed);
}

RetryBudget::RequestGuard RetryBudget::StartRequest() {
  requests_.fetch_add(1, std::memory_order_relaxed);
  return RequestGuard(this);
}

uint32_t RetryBudget::limit() const {
  const uint64_t share = static_cast<uint64_t>(requests_.load(std::memory_order_relaxed)) *
                         percent_.load(std::memory_order_relaxed) / 100;
  return static_cast<uint32_t>(std::max<uint64_t>(min_.load(std::memory_order_relaxed),
                                                  std::min<uint64_t>(share, UINT32_MAX)));
}

RetryBudget::RetryGuard RetryBudget::TryRetry() {
  uint32_t current = retries_.load(std::memory_order_relaxed);
  for (;;) {
    if (current >= limit()) {
      rejected_.fetch_add(1, std::memory_order_relaxed);
      return RetryGuard();
    }
    // Compare-and-swap so two workers cannot both take the last slot.
    if (retries_.compare_exchange_weak(current, current + 1, std::memory_order_relaxed))
      return RetryGuard(this);
  }
}

}  // namespace geogate::health
