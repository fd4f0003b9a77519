#include "health/health_checker.h"

namespace geogate::health {

HealthChecker::HealthChecker(const TimeSource& time, TimerFactory& timers,
                             ProbeClientFactory& clients, std::function<uint64_t()> random,
                             Hooks hooks)
    : ctx_{time,
           timers,
           clients,
           std::move(random),
           std::move(hooks.on_change),
           std::move(hooks.on_probe)} {}

HealthChecker::~HealthChecker() {
  stop();
}

void HealthChecker::update(const config::Snapshot& snapshot,
                           const std::vector<BackendStatePtr>& states) {
  absl::flat_hash_map<std::string, std::unique_ptr<ProbeSession>> next;
  next.reserve(states.size());
  std::vector<ProbeSession*> fresh;
  const size_t n = std::min(snapshot.backends.size(), states.size());
  for (size_t i = 0; i < n; ++i) {
    if (!states[i]) continue;
    const std::string& key = states[i]->key();
    ProbeSession::Settings settings{snapshot.backends[i], snapshot.health,
                                    snapshot.routing.ewma_alpha};
    auto it = sessions_.find(key);
    if (it != sessions_.end() && it->second->state() == states[i]) {
      it->second->reconfigure(std::move(settings));
      next.emplace(key, std::move(it->second));
      sessions_.erase(it);
    } else if (!next.contains(key)) {
      auto session = std::make_unique<ProbeSession>(ctx_, states[i], std::move(settings));
      fresh.push_back(session.get());
      next.emplace(key, std::move(session));
    }
  }
  // What is left probes backends that are gone: their sessions (timers,
  // clients, connections) end here.
  sessions_ = std::move(next);
  for (ProbeSession* session : fresh)
    session->start();
}

bool HealthChecker::MarkUnhealthy(BackendState& state, FailureReason reason) {
  auto it = sessions_.find(state.key());
  if (it == sessions_.end() || it->second->state().get() != &state) return false;
  it->second->HardFailure(reason);
  return true;
}

void HealthChecker::stop() {
  sessions_.clear();
}

const ProbeSession* HealthChecker::find(const std::string& key) const {
  auto it = sessions_.find(key);
  return it == sessions_.end() ? nullptr : it->second.get();
}

}  // namespace geogate::health
