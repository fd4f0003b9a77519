// Builds the /metrics page from the merged worker counters, the health
// thread's stats and the live gauges (in-flight, health) read at scrape time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/snapshot.h"
#include "health/health_service.h"
#include "proxy/runtime.h"
#include "proxy/worker_metrics.h"

namespace geogate::server {

struct MetricsInputs {
  const proxy::WorkerMetrics* workers = nullptr;
  const proxy::Runtime* runtime = nullptr;
  std::vector<health::BackendHealthStats> health;
  uint64_t reloads_ok = 0;
  uint64_t reloads_failed = 0;
  int64_t last_reload_ok_unix = 0;
  int64_t last_reload_failed_unix = 0;  // 0 = never
  uint64_t geo_reload_failures = 0;
  int64_t open_connections = 0;
  int64_t active_requests = 0;
  int64_t active_streams = 0;
  bool draining = false;
  bool ready = false;
  uint64_t access_log_dropped = 0;
  // Tracing (zero while [tracing] was never enabled).
  uint64_t trace_spans_exported = 0;
  uint64_t trace_spans_dropped_queue_full = 0;
  uint64_t trace_spans_dropped_export_failed = 0;
  const std::vector<std::string>* listener_addresses = nullptr;
  const std::vector<config::Listener>* listeners = nullptr;
};

std::string FormatMetrics(const MetricsInputs& in);

}  // namespace geogate::server
