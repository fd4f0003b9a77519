// Passive outlier detection: what workers saw go wrong with real requests.
// Runs on the health thread (HealthService posts worker reports here) with
// injected time.
//
// Rules:
//  - kConnectRefused proves the backend is down: it is marked unhealthy at
//    once (through the probe session, so it then has to pass
//    `healthy_threshold` fresh probes to return). Workers should report a
//    reset during connect or the TLS handshake as kConnectRefused too.
//  - Any other failure (5xx, first-token timeout, reset, stream idle, ...) of
//    a healthy, not ejected backend counts in `consecutive_failures`; a
//    success (HealthService::ReportSuccess) resets it. At
//    `outlier_consecutive_failures` (0 disables) the backend is ejected for
//    outlier_base_ejection x N, capped at outlier_max_ejection, where N counts
//    its ejections in the current streak. The streak starts over once the
//    backend has stayed in rotation for outlier_max_ejection after a return.
//  - Never more than `max_ejection_percent` of a pool is ejected at once. A
//    pool is the backends of one region serving one model (region_index x
//    model, as config::Health documents); a backend serving several models
//    must fit under the cap of each of its pools. When every backend of a
//    region serves the same models this is simply the region. Past the cap
//    the failure is counted but the backend stays, and the next failure
//    checks again. The cap never widens residency: the request path does not
//    route outside the allowed set to make up for ejected backends (no panic
//    mode).
//
// How ejection is represented in BackendState (read lock-free by workers):
//  - `ejected_until_ns` != 0 means ejected; the value is the monotonic time
//    the ejection expires. It is NOT cleared when that time passes: the
//    backend stays out until a probe started at or after the expiry
//    succeeds, and only then does OnProbeSuccess() store 0. So routable()
//    only needs `ejected_until_ns == 0`; ejected_until_ns in the past means
//    "expired, waiting for a good probe".
//  - `ejections` counts ejections over the backend's life; `reason` is
//    kEjected while ejected (unless a probe verdict of unhealthy says more).
//  - `state` is left to the probes: an ejected backend may well be kHealthy.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "config/snapshot.h"
#include "health/backend_state.h"
#include "health/health_service.h"
#include "health/health_table.h"
#include "health/time_source.h"

namespace geogate::health {

class OutlierDetector {
 public:
  struct Hooks {
    /// Marks a backend unhealthy at once (HealthChecker::MarkUnhealthy).
    std::function<void(BackendState&, FailureReason)> mark_unhealthy;
    /// Ejections and returns, reported with `ejected = true` and from/to as
    /// the request path sees them: healthy -> unhealthy on ejection.
    std::function<void(const BackendState&, const StateChange&)> on_change;
  };

  /// What ReportFailure() did, for tests and logs.
  enum class Verdict : uint8_t {
    kIgnored,          // unknown backend, no failure, or already out of rotation
    kCounted,          // counted towards outlier_consecutive_failures
    kCapped,           // would eject, but the pool is at max_ejection_percent
    kEjected,          // ejected now
    kMarkedUnhealthy,  // connection refused: unhealthy at once
  };

  OutlierDetector(const TimeSource& time, Hooks hooks);

  /// Adopts a new snapshot: settings, pools (region_index x model), backends.
  /// Backends that stay keep their streak; those gone are forgotten.
  void update(const config::Snapshot& snapshot, const std::vector<BackendStatePtr>& states);
  /// A worker saw a request to `state` fail with `reason`.
  Verdict ReportFailure(BackendState& state, FailureReason reason);
  /// A probe of `state` that started at `probe_started` succeeded. Ends an
  /// expired ejection when the probe started at or after the expiry.
  /// @return true when the backend returned from an ejection.
  bool OnProbeSuccess(BackendState& state, MonotonicTime probe_started);

  /// Backends of `region` currently ejected (expired but not yet returned
  /// ones included).
  size_t EjectedInRegion(size_t region) const;
  /// Ejections in the backend's current streak (0 when unknown).
  uint32_t streak(const BackendState& state) const;

 private:
  struct Entry {
    BackendStatePtr state;
    std::string name;
    size_t region = 0;
    std::vector<std::string> models;  // canonical names it serves
    uint32_t streak = 0;
    int64_t returned_at_ns = 0;  // last return from an ejection, 0 = never
  };
  void eject(Entry& entry, FailureReason cause, int64_t now_ns);
  bool UnderPoolCap(const Entry& entry) const;

  const TimeSource& time_;
  Hooks hooks_;
  config::Health settings_;
  absl::flat_hash_map<const BackendState*, Entry> entries_;
};

const char* OutlierVerdictName(OutlierDetector::Verdict v);

}  // namespace geogate::health
