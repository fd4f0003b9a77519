#include "routing/ttft_estimate.h"

#include <algorithm>
#include <cmath>

namespace geogate::routing {
namespace {

// A request without a slot waits for a running stream to end. That takes at
// least a prefill (engines whose queue waits on prefill compute) and often
// several (stream length / capacity on slot-bound ones); the selector counts
// two service times per position. Chosen with bench/routing, which models
// slot-bound servers; the TTFT EWMA, which includes real waits, corrects
// the rest.
constexpr double kServicesPerWaitingRequest = 2.0;

// Above this share of capacity, a backend may be full by the time our
// request lands: other edges send to it too and load reports are up to a
// probe interval old. The expected number of requests ahead of ours without
// a slot rises linearly from 0 here to 1 at full, so load spreads before the
// queue forms instead of after.
constexpr double kHeadroomKnee = 0.8;

double Ms(config::Millis d) {
  return static_cast<double>(d.count());
}

// Weight of the TTFT sample against the prior: 1 while the sample is younger
// than `stale_ms`, then falling linearly to 0 over another `stale_ms`. A
// backend that lost its traffic because of a slow sample is therefore back
// at the prior (and tried again) after at most two stale periods.
double SampleWeight(double age_ms, double stale_ms) {
  if (age_ms <= stale_ms) return 1.0;
  if (age_ms >= 2 * stale_ms) return 0.0;
  return 1.0 - (age_ms - stale_ms) / stale_ms;
}

// A TTFT sample is usable unless it predates the backend's current healthy
// period: the health module resets the EWMA on return, and this covers a
// request that began before the outage and reported after the reset.
bool UsableSample(const BackendObservation& obs) {
  if (obs.ttft_ms < 0) return false;
  return !(obs.since_healthy_ms > 0 && obs.ttft_age_ms > obs.since_healthy_ms);
}

}  // namespace

double HaversineKm(const config::GeoPoint& a, const config::GeoPoint& b) {
  constexpr double kEarthRadiusKm = 6371.0;
  constexpr double kRad = M_PI / 180.0;
  double dlat = (b.lat - a.lat) * kRad;
  double dlon = (b.lon - a.lon) * kRad;
  double h = std::sin(dlat / 2) * std::sin(dlat / 2) + std::cos(a.lat * kRad) *
                                                           std::cos(b.lat * kRad) *
                                                           std::sin(dlon / 2) * std::sin(dlon / 2);
  return 2 * kEarthRadiusKm * std::asin(std::min(1.0, std::sqrt(h)));
}

double LoadReportFreshMs(const config::Snapshot& snap) {
  return 3 * Ms(snap.health.interval) + Ms(snap.health.timeout);
}

TtftEstimate EstimateTtft(const config::Snapshot& snap, size_t backend,
                          const BackendObservation& obs) {
  const config::Backend& b = snap.backends[backend];
  TtftEstimate e;

  // Network: the probe's measurement, else fibre at ~1 ms per 100 km.
  if (obs.rtt_ms >= 0) {
    e.rtt_ms = obs.rtt_ms;
  } else {
    e.rtt_ms = HaversineKm(snap.gateway.location, snap.regions[b.region_index].location) / 100.0;
    e.rtt_is_prior = true;
  }

  // Backend: the observed TTFT contains one round trip (the gateway times it
  // from sending the request); the rest is the backend's prefill and queue.
  const double prior = Ms(snap.routing.prior_ttft);
  if (UsableSample(obs)) {
    const double sampled = std::max(0.0, obs.ttft_ms - e.rtt_ms);
    const double w = SampleWeight(obs.ttft_age_ms, Ms(snap.routing.sample_stale));
    e.service_ms = w * sampled + (1 - w) * prior;
    e.service_is_prior = w == 0;
    e.fresh_sample = w == 1;
  } else {
    e.service_ms = prior;
    e.service_is_prior = true;
  }

  // Queue: our in-flight count is exact for this gateway; the backend's own
  // report (when fresh) also sees other edges. Taking the larger avoids
  // counting our requests twice.
  const double capacity = std::max<uint32_t>(b.capacity, 1);
  double occupied = obs.inflight;
  double reported_queue = 0;
  double kv = 0;
  const health::LoadReport& load = obs.load;
  if (load.at_ns != 0 && obs.load_age_ms <= LoadReportFreshMs(snap)) {
    reported_queue = std::max(0, load.queue_depth);
    occupied = std::max(occupied, std::max(0, load.inflight) + reported_queue);
    kv = std::max(0.0f, load.kv_cache_utilization);
  }
  // Requests without a slot when ours arrives, ours included: the known
  // queue, or the chance of one near full.
  const double near_full =
      std::max(0.0, (occupied / capacity - kHeadroomKnee) / (1 - kHeadroomKnee));
  const double waiting =
      std::max({near_full, occupied + 1 - capacity, reported_queue > 0 ? reported_queue + 1 : 0.0});
  e.queue_ms = waiting * kServicesPerWaitingRequest * e.service_ms;
  e.utilization = std::max(occupied / capacity, kv);
  return e;
}

double ExpectedTtftMs(const config::Snapshot& snap, size_t backend, const BackendObservation& obs) {
  return EstimateTtft(snap, backend, obs).total_ms();
}

}  // namespace geogate::routing
