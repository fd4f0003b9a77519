// Active health checking: one ProbeSession per backend, keyed by state_key,
// created, reconfigured and dropped as snapshots come and go. Pure logic over
// injected time, timers, probe clients and randomness, so tests drive it in
// simulated time with fake clients. Single-threaded: the health thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "config/snapshot.h"
#include "health/health_table.h"
#include "health/probe_session.h"

namespace geogate::health {

class HealthChecker {
 public:
  struct Hooks {
    /// Each state change decided by probes or hard failures.
    std::function<void(const BackendState&, const StateChange&)> on_change;
    /// Each completed probe (after the session published its result).
    std::function<void(BackendState&, const ProbeResult&, MonotonicTime started)> on_probe;
  };

  /// @param random a source of uniform 64-bit values (seeded in tests).
  HealthChecker(const TimeSource& time, TimerFactory& timers, ProbeClientFactory& clients,
                std::function<uint64_t()> random, Hooks hooks);
  ~HealthChecker();

  /// Probes `snapshot.backends[i]` into `states[i]`: starts sessions for new
  /// keys (first probe after an initial jitter), applies new settings to the
  /// others without resetting their verdict, and stops sessions of keys gone.
  void update(const config::Snapshot& snapshot, const std::vector<BackendStatePtr>& states);
  /// A hard failure reported by the outlier detector (connection refused).
  /// @return false when no session probes this backend.
  bool MarkUnhealthy(BackendState& state, FailureReason reason);
  /// Stops every session (their clients close their connections).
  void stop();

  size_t size() const { return sessions_.size(); }
  /// @return the session probing `key`, or null.
  const ProbeSession* find(const std::string& key) const;

 private:
  ProbeContext ctx_;
  absl::flat_hash_map<std::string, std::unique_ptr<ProbeSession>> sessions_;
};

}  // namespace geogate::health
