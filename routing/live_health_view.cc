#include "routing/live_health_view.h"

namespace geogate::routing {

BackendObservation ObserveState(const health::BackendState& s, int64_t now_ns, uint64_t model_key) {
  BackendObservation o;
  o.state = s.state.load(std::memory_order_relaxed);
  o.ejected = s.ejected();
  int64_t rtt = s.rtt_ewma_us.load(std::memory_order_relaxed);
  o.rtt_ms = rtt < 0 ? -1 : static_cast<double>(rtt) / 1000.0;
  const std::atomic<int64_t>* ttft_us = &s.ttft_ewma_us;
  const std::atomic<int64_t>* ttft_at = &s.ttft_at_ns;
  if (model_key != 0) {
    bool all_taken = false;
    if (const health::ModelTtft* slot = s.FindModelSlot(model_key, &all_taken)) {
      ttft_us = &slot->ewma_us;
      ttft_at = &slot->at_ns;
    } else if (!all_taken) {
      ttft_us = nullptr;  // this model has no sample on this backend yet
    }
  }
  int64_t ttft = ttft_us ? ttft_us->load(std::memory_order_relaxed) : -1;
  o.ttft_ms = ttft < 0 ? -1 : static_cast<double>(ttft) / 1000.0;
  int64_t at = ttft_us ? ttft_at->load(std::memory_order_relaxed) : 0;
  o.ttft_age_ms = at == 0 ? 0 : static_cast<double>(now_ns - at) / 1e6;
  o.inflight = s.inflight.load(std::memory_order_relaxed);
  o.load = s.load();
  o.load_age_ms = o.load.at_ns == 0 ? 0 : static_cast<double>(now_ns - o.load.at_ns) / 1e6;
  int64_t since = s.since_ns.load(std::memory_order_relaxed);
  o.since_healthy_ms = o.state == health::HealthState::kHealthy && since != 0
                           ? static_cast<double>(now_ns - since) / 1e6
                           : 0;
  return o;
}

BackendObservation LiveHealthView::Observe(size_t backend, uint64_t model_key) const {
  if (backend >= states_.size() || !states_[backend]) return {};
  return ObserveState(*states_[backend], now_ns_, model_key);
}

}  // namespace geogate::routing
