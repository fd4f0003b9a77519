// The health thread: active probing of every backend, passive outlier
// detection from what workers observe, and the retry budget. Workers only
// touch atomics in BackendState and post failure reports here.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/snapshot.h"
#include "health/backend_state.h"
#include "health/health_table.h"

namespace geogate::health {

struct StateChange {
  std::string backend;  // name
  HealthState from = HealthState::kUnknown;
  HealthState to = HealthState::kUnknown;
  FailureReason reason = FailureReason::kNone;
  bool ejected = false;  // outlier ejection rather than probe verdict
};

/// Counters kept by the health thread for /metrics (copied under a mutex at
/// scrape time; never touched by workers).
struct BackendHealthStats {
  std::string name;
  std::string region;
  uint64_t probes_ok = 0;
  uint64_t probe_failures[static_cast<size_t>(FailureReason::kCount)] = {};
  /// Probe RTT histogram over kProbeRttBucketsMs (cumulative counts are
  /// computed by the exporter; these are per-bucket, last one is +Inf).
  std::vector<uint64_t> rtt_buckets;
  double rtt_sum_seconds = 0;
  uint64_t ejections = 0;
  uint64_t state_changes = 0;
};
inline constexpr double kProbeRttBucketsMs[] = {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000};

class HealthService {
 public:
  struct Options {
    /// Runs on the health thread on every state change (log line, metric).
    std::function<void(const StateChange&)> on_change;
  };
  virtual ~HealthService() = default;

  /// Starts the health thread. Probing starts at the first Update().
  virtual void Start() = 0;
  /// Stops probing and joins the thread. Idempotent.
  virtual void Stop() = 0;
  /// Thread-safe. Probe `snapshot.backends[i]` into `states[i]`; stop probing
  /// backends that are gone; apply new [health] settings.
  virtual void Update(config::SnapshotConstPtr snapshot, std::vector<BackendStatePtr> states) = 0;
  /// Thread-safe, called by workers when a request to the backend failed
  /// (connect refused -> out of rotation at once; others count towards
  /// outlier_consecutive_failures).
  virtual void ReportFailure(const BackendStatePtr& state, FailureReason reason) = 0;
  /// Thread-safe. Counters for /metrics.
  virtual std::vector<BackendHealthStats> Stats() const = 0;

  /// Called by workers when a request to the backend succeeded: resets the
  /// passive consecutive-failure count (an atomic store only when non-zero).
  static void ReportSuccess(BackendState& state) {
    if (state.consecutive_failures.load(std::memory_order_relaxed) != 0)
      state.consecutive_failures.store(0, std::memory_order_relaxed);
  }

  /// The production service: an Asio health thread probing over HTTP(S).
  static std::unique_ptr<HealthService> Create(Options options);
};

}  // namespace geogate::health
