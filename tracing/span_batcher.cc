#include "tracing/span_batcher.h"

#include <algorithm>
#include <iterator>

namespace geogate::tracing {

void SpanBatcher::Configure(BatchOptions options) {
  std::lock_guard lock(mu_);
  options_ = options;
}

bool SpanBatcher::Add(Span&& span, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (queue_.size() >= options_.queue_limit) {
    queue_full_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (queue_.empty()) oldest_ = now;
  queue_.push_back(std::move(span));
  return true;
}

std::vector<Span> SpanBatcher::TakeReady(Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (queue_.empty()) return {};
  if (queue_.size() < options_.batch_size && now - oldest_ < options_.batch_interval) return {};
  return TakeLocked();
}

std::vector<Span> SpanBatcher::TakeAny() {
  std::lock_guard lock(mu_);
  return TakeLocked();
}

size_t SpanBatcher::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

// The oldest batch_size spans. What remains keeps the time of the oldest
// taken, so a backlog drains batch after batch without waiting again.
std::vector<Span> SpanBatcher::TakeLocked() {
  size_t n = std::min(queue_.size(), std::max<size_t>(options_.batch_size, 1));
  std::vector<Span> batch;
  if (n == queue_.size()) {
    batch.swap(queue_);
    return batch;
  }
  batch.reserve(n);
  std::move(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n),
            std::back_inserter(batch));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  return batch;
}

}  // namespace geogate::tracing
