// Per-backend counters of the health thread for /metrics: probes by outcome,
// probe RTT histogram, ejections, state changes. Written on the health thread,
// copied out under a mutex at scrape time; workers never touch it.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "config/snapshot.h"
#include "health/health_service.h"
#include "health/probe_client.h"

namespace geogate::health {

class HealthStats {
 public:
  /// Follows a snapshot: names and regions are refreshed, counters of backends
  /// that stay are kept, those of backends gone are dropped.
  void update(const config::Snapshot& snapshot, const std::vector<BackendStatePtr>& states);
  void RecordProbe(const BackendState& state, const ProbeResult& result);
  void RecordChange(const BackendState& state, const StateChange& change);
  /// @return a copy, in snapshot order.
  std::vector<BackendHealthStats> snapshot() const;

  /// Index into BackendHealthStats::rtt_buckets for an RTT in milliseconds.
  static size_t BucketFor(double rtt_ms);

 private:
  mutable std::mutex mu_;
  std::vector<BackendHealthStats> stats_;
  absl::flat_hash_map<std::string, size_t> index_;  // state key -> stats_ index
};

}  // namespace geogate::health
