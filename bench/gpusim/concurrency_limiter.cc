#include "bench/gpusim/concurrency_limiter.h"

#include <algorithm>

#include <boost/asio/post.hpp>

namespace gpusim {

ConcurrencyLimiter::Admission ConcurrencyLimiter::admit(const boost::asio::any_io_executor& ex,
                                                        WaiterPtr& waiter) {
  if (max_running_ == 0) {
    running_.fetch_add(1, std::memory_order_relaxed);
    return Admission::kRunning;
  }
  std::lock_guard lock(mu_);
  if (running_.load(std::memory_order_relaxed) < max_running_) {
    running_.fetch_add(1, std::memory_order_relaxed);
    return Admission::kRunning;
  }
  if (queue_limit_ > 0 && waiting_.load(std::memory_order_relaxed) >= queue_limit_) {
    return Admission::kRejected;
  }
  waiter = std::make_shared<Waiter>(ex);
  queue_.push_back(waiter);
  waiting_.fetch_add(1, std::memory_order_relaxed);
  return Admission::kQueued;
}

bool ConcurrencyLimiter::abandon(Waiter& waiter) {
  std::lock_guard lock(mu_);
  if (waiter.granted.load(std::memory_order_relaxed)) return false;
  // The entry stays in the queue and is skipped by release().
  waiter.abandoned = true;
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void ConcurrencyLimiter::release() {
  if (max_running_ == 0) {
    running_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  std::lock_guard lock(mu_);
  while (!queue_.empty()) {
    WaiterPtr next = std::move(queue_.front());
    queue_.pop_front();
    if (next->abandoned) continue;
    // The slot passes to `next` without ever being free, so FIFO order holds
    // against requests arriving right now.
    waiting_.fetch_sub(1, std::memory_order_relaxed);
    next->granted.store(true, std::memory_order_release);
    // Timers are not thread-safe: cancel on the waiter's own executor.
    boost::asio::post(next->wake.get_executor(), [next] { next->wake.cancel(); });
    return;
  }
  running_.fetch_sub(1, std::memory_order_relaxed);
}

double ConcurrencyLimiter::utilization() const {
  const double cap = max_running_ > 0 ? static_cast<double>(max_running_) : 64.0;
  return std::clamp(static_cast<double>(running()) / cap, 0.0, 1.0);
}

}  // namespace gpusim
