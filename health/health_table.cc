#include "health/health_table.h"

namespace geogate::health {

std::vector<BackendStatePtr> HealthTable::Bind(const config::Snapshot& snapshot) {
  std::vector<BackendStatePtr> bound;
  bound.reserve(snapshot.backends.size());
  absl::flat_hash_map<std::string, BackendStatePtr> next;
  next.reserve(snapshot.backends.size());

  std::lock_guard<std::mutex> lock(mu_);
  for (const config::Backend& backend : snapshot.backends) {
    std::string key = backend.state_key();
    BackendStatePtr state;
    if (auto it = states_.find(key); it != states_.end()) {
      state = it->second;  // same name and URL: health, EWMAs, in-flight carry over
    } else if (auto dup = next.find(key); dup != next.end()) {
      state = dup->second;  // the loader rejects duplicate names; share rather than split
    } else {
      state = std::make_shared<BackendState>(key);
    }
    next[key] = state;
    bound.push_back(std::move(state));
  }
  // Keys not in the new snapshot are dropped here; requests still holding
  // their shared_ptr keep them alive until they finish.
  states_ = std::move(next);
  return bound;
}

BackendStatePtr HealthTable::Find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(key);
  return it == states_.end() ? nullptr : it->second;
}

size_t HealthTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return states_.size();
}

}  // namespace geogate::health
