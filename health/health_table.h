// The table of live backend state, keyed by Backend::state_key(). It outlives
// config snapshots: a reload binds the new snapshot's backends to the same
// BackendState objects when their key is unchanged, so health, EWMAs and
// in-flight counts carry over; new keys start fresh (kUnknown: no traffic
// until the first successful probe); removed keys are dropped from the table
// but stay alive while in-flight requests still hold them.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "config/snapshot.h"
#include "health/backend_state.h"

namespace geogate::health {

using BackendStatePtr = std::shared_ptr<BackendState>;

class HealthTable {
 public:
  /// @return one state per snapshot backend, in snapshot order. Thread-safe;
  ///         called on reload only, never on the request path.
  std::vector<BackendStatePtr> Bind(const config::Snapshot& snapshot);
  /// @return the state for a key, or null.
  BackendStatePtr Find(const std::string& key) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, BackendStatePtr> states_;
};

}  // namespace geogate::health
