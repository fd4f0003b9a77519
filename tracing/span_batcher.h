// The hand-over from the workers to the exporter: a bounded queue of
// finished spans and the batching rule. Workers Add() under a short lock
// (a vector push); a full queue drops the span and counts it, so a slow or
// absent collector never holds a request back. The exporter takes a batch
// when batch_size spans wait, or when the oldest waited batch_interval.
// Time is passed in, so the rule is tested in simulated time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tracing/span.h"

namespace geogate::tracing {

struct BatchOptions {
  size_t batch_size = 512;
  std::chrono::milliseconds batch_interval{1000};
  size_t queue_limit = 8192;
};

class SpanBatcher {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SpanBatcher(BatchOptions options) : options_(options) {}

  /// New limits; spans already queued beyond a smaller limit stay queued.
  void Configure(BatchOptions options);

  /// Queues a finished span at `now`. @return false when the queue was full
  /// and the span was dropped (counted in dropped_queue_full()).
  bool Add(Span&& span, Clock::time_point now);

  /// Up to batch_size spans when a batch is due at `now`; empty otherwise.
  std::vector<Span> TakeReady(Clock::time_point now);

  /// Up to batch_size spans, due or not (the last flush before exit).
  std::vector<Span> TakeAny();

  size_t queued() const;

  // ---- outcome counters (any thread) ------------------------------------
  void CountExported(size_t n) { exported_.fetch_add(n, std::memory_order_relaxed); }
  void CountExportFailed(size_t n) { export_failed_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t exported() const { return exported_.load(std::memory_order_relaxed); }
  uint64_t dropped_queue_full() const { return queue_full_.load(std::memory_order_relaxed); }
  uint64_t dropped_export_failed() const { return export_failed_.load(std::memory_order_relaxed); }

 private:
  std::vector<Span> TakeLocked();

  mutable std::mutex mu_;
  BatchOptions options_;
  std::vector<Span> queue_;
  Clock::time_point oldest_{};  // when the oldest queued span was added
  std::atomic<uint64_t> exported_{0};
  std::atomic<uint64_t> export_failed_{0};
  std::atomic<uint64_t> queue_full_{0};
};

}  // namespace geogate::tracing
