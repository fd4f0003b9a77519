// Backend selection (DESIGN.md §4 steps 6-7, §7 "Selection order"): a pure
// function of the snapshot, the request's facts, the residency-allowed region
// set, a view of live health/load, the time and a random number. It returns
// the ordered attempt plan. The plan is built from the allowed set and
// nothing else, so no retry or failover can leave it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/region_set.h"
#include "config/snapshot.h"
#include "health/backend_state.h"
#include "health/time_source.h"

namespace geogate::routing {

/// What the selector knows about one backend right now.
struct BackendObservation {
  health::HealthState state = health::HealthState::kUnknown;
  bool ejected = false;
  double rtt_ms = -1;        // probe RTT EWMA; < 0 = no sample
  double ttft_ms = -1;       // observed TTFT EWMA; < 0 = no sample
  double ttft_age_ms = 0;    // age of the last TTFT sample
  uint32_t inflight = 0;
  health::LoadReport load;   // the backend's own report, if any (at_ns == 0: none)
  double since_healthy_ms = 0;  // time since the backend last became healthy

  bool routable() const { return state == health::HealthState::kHealthy && !ejected; }
};

class HealthView {
 public:
  virtual ~HealthView() = default;
  /// @param backend index into Snapshot::backends.
  virtual BackendObservation Observe(size_t backend) const = 0;
};

struct RequestFacts {
  size_t model = 0;                        // index into Snapshot::models
  const config::Tenant* tenant = nullptr;  // null = anonymous
};

enum class Outcome : uint8_t {
  kRoute,            // plan holds at least one backend
  kResidencyDenied,  // the model is served only outside the allowed set (451)
  kNoHealthy,        // allowed backends exist for the model, none routable (503)
  kCapacity,         // routable ones exist, all at capacity (429)
};
const char* OutcomeName(Outcome o);

struct Decision {
  Outcome outcome = Outcome::kRoute;
  std::vector<size_t> plan;  // backend indices, best first
  /// Per plan entry: the expected TTFT the selector computed (ms).
  std::vector<double> expected_ttft_ms;
  std::string reason;  // for the access log: winner, runner-up and why it lost
};

/// Expected time to first token for one backend (ms), per DESIGN.md §7:
/// RTT EWMA + TTFT EWMA (decayed towards the prior when stale) + queue
/// estimate; the great-circle prior before any sample exists.
double ExpectedTtftMs(const config::Snapshot& snap, size_t backend, const BackendObservation& obs);

/// Great-circle distance in km.
double HaversineKm(const config::GeoPoint& a, const config::GeoPoint& b);

Decision Decide(const config::Snapshot& snap, const RequestFacts& facts,
                const config::RegionSet& allowed, const HealthView& health,
                health::MonotonicTime now, uint64_t random);

}  // namespace geogate::routing
