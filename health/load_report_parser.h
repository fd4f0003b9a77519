// Pure parsers for the load a backend reports about itself (health.load_report):
// a JSON probe body ("auto") or vLLM's Prometheus /metrics (a path). Kept
// apart from the HTTP client so they are tested on strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "health/backend_state.h"

namespace geogate::health {

/// Reads `queue_depth` or `num_requests_waiting`, `inflight` or
/// `num_requests_running`, and `kv_cache_utilization` (0..1) from a JSON
/// object body. Fields that are absent or not numbers stay -1.
/// @return nullopt when the body is not a JSON object or has none of them.
std::optional<LoadReport> ParseJsonLoad(std::string_view body);

/// Scans Prometheus text exposition for vLLM's gauges, line by line, so a
/// large /metrics body is read as a stream and never held whole:
/// `vllm:num_requests_waiting` -> queue_depth, `vllm:num_requests_running` ->
/// inflight (each summed over label sets, e.g. several models on one server),
/// `vllm:gpu_cache_usage_perc` or its newer name `vllm:kv_cache_usage_perc`
/// -> kv_cache_utilization (a 0..1 fraction despite the name; the highest).
class PrometheusLoadScanner {
 public:
  /// Feeds one line (without its newline).
  void line(std::string_view text);
  /// Feeds a chunk of the body; lines may span chunks.
  void feed(std::string_view chunk);
  /// Ends the body (a last line without newline is taken).
  void finish();
  /// @return what was found, or nullopt when none of the gauges appeared.
  std::optional<LoadReport> result() const;

 private:
  std::string pending_;
  bool overlong_ = false;
  double waiting_ = 0, running_ = 0, kv_ = -1;
  bool have_waiting_ = false, have_running_ = false, have_kv_ = false;
};

/// Convenience over a whole body.
std::optional<LoadReport> ParsePrometheusLoad(std::string_view body);

}  // namespace geogate::health
