#include "health/health_stats.h"

#include <iterator>

namespace geogate::health {

size_t HealthStats::BucketFor(double rtt_ms) {
  size_t i = 0;
  while (i < std::size(kProbeRttBucketsMs) && rtt_ms > kProbeRttBucketsMs[i])
    ++i;
  return i;  // std::size(kProbeRttBucketsMs) is the +Inf bucket
}

void HealthStats::update(const config::Snapshot& snapshot,
                         const std::vector<BackendStatePtr>& states) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BackendHealthStats> next;
  absl::flat_hash_map<std::string, size_t> next_index;
  const size_t n = std::min(snapshot.backends.size(), states.size());
  for (size_t i = 0; i < n; ++i) {
    if (!states[i] || next_index.contains(states[i]->key())) continue;
    BackendHealthStats entry;
    if (auto it = index_.find(states[i]->key()); it != index_.end()) {
      entry = std::move(stats_[it->second]);
    } else {
      entry.rtt_buckets.assign(std::size(kProbeRttBucketsMs) + 1, 0);
    }
    entry.name = snapshot.backends[i].name;
    entry.region = snapshot.backends[i].region;
    next_index[states[i]->key()] = next.size();
    next.push_back(std::move(entry));
  }
  stats_ = std::move(next);
  index_ = std::move(next_index);
}

void HealthStats::RecordProbe(const BackendState& state, const ProbeResult& result) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(state.key());
  if (it == index_.end()) return;
  BackendHealthStats& s = stats_[it->second];
  if (result.ok) {
    ++s.probes_ok;
    const double ms = static_cast<double>(result.rtt.count()) / 1000.0;
    ++s.rtt_buckets[BucketFor(ms)];
    s.rtt_sum_seconds += ms / 1000.0;
  } else {
    const auto reason = static_cast<size_t>(result.reason);
    if (reason < std::size(s.probe_failures)) ++s.probe_failures[reason];
  }
}

void HealthStats::RecordChange(const BackendState& state, const StateChange& change) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(state.key());
  if (it == index_.end()) return;
  BackendHealthStats& s = stats_[it->second];
  // An ejection is one event reported as a change; its return is another
  // change but not another ejection.
  if (change.ejected && change.to == HealthState::kUnhealthy &&
      change.from == HealthState::kHealthy)
    ++s.ejections;
  ++s.state_changes;
}

std::vector<BackendHealthStats> HealthStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace geogate::health
