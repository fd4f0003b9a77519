// The selector's score: expected time to first token (TTFT) of one backend
// for a request arriving at this edge now (DESIGN.md §4 step 7, §7). Decide
// ranks by it, and /admin/backends and /metrics show the same number, so an
// operator sees exactly what the selector saw.
//
//   expected = rtt + service + queue
//   rtt      probe RTT EWMA; before the first probe, the great-circle
//            distance edge -> region at 1 ms per 100 km of fibre
//   service  the backend's own part of the observed TTFT: TTFT EWMA minus
//            the RTT it contains (the gateway times a TTFT from sending the
//            request, so one round trip is inside it). Past
//            routing.sample_stale_ms without a new sample it slides linearly
//            to routing.prior_ttft_ms over another sample_stale_ms. Before
//            any sample: routing.prior_ttft_ms.
//   queue    waiting for a slot: (requests without a slot when ours
//            arrives, ours included) x 2 x service. Zero below 80 % of
//            capacity when the backend reports no queue; from there to full
//            the expected count rises from 0 to 1.
// docs/routing.md has a worked example.
#pragma once

#include <cstdint>

#include "config/snapshot.h"
#include "health/backend_state.h"

namespace geogate::routing {

/// What the selector knows about one backend right now.
struct BackendObservation {
  health::HealthState state = health::HealthState::kUnknown;
  bool ejected = false;
  double rtt_ms = -1;           // probe RTT EWMA; < 0 = no sample
  double ttft_ms = -1;          // observed TTFT EWMA; < 0 = no sample
  double ttft_age_ms = 0;       // age of the last TTFT sample
  uint32_t inflight = 0;        // this gateway's requests in flight to it (all workers)
  health::LoadReport load;      // the backend's own report, if any (at_ns == 0: none)
  double load_age_ms = 0;       // age of `load`
  double since_healthy_ms = 0;  // time since the backend last became healthy

  bool routable() const { return state == health::HealthState::kHealthy && !ejected; }
};

/// The parts of the expected TTFT, for the selector, the reason string and
/// the tests. All in milliseconds.
struct TtftEstimate {
  double rtt_ms = 0;
  double service_ms = 0;
  double queue_ms = 0;
  /// Share of the backend in use, 0..(more than 1 when it queues): the
  /// larger of occupied / capacity and the reported KV-cache use.
  double utilization = 0;
  bool rtt_is_prior = false;      // no probe sample: distance prior
  bool service_is_prior = false;  // no usable TTFT sample: prior_ttft_ms
  /// A usable TTFT sample younger than routing.sample_stale_ms: the service
  /// part is measured, not (partly) the prior.
  bool fresh_sample = false;

  double total_ms() const { return rtt_ms + service_ms + queue_ms; }
};

/// Great-circle distance in km.
double HaversineKm(const config::GeoPoint& a, const config::GeoPoint& b);

/// A load report older than this is ignored: three missed probes.
double LoadReportFreshMs(const config::Snapshot& snap);

/// The estimate and its parts for `backend` (index into snap.backends).
TtftEstimate EstimateTtft(const config::Snapshot& snap, size_t backend,
                          const BackendObservation& obs);

/// EstimateTtft(...).total_ms(): the one number the selector ranks by.
double ExpectedTtftMs(const config::Snapshot& snap, size_t backend, const BackendObservation& obs);

}  // namespace geogate::routing
