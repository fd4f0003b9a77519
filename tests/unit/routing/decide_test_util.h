// Builds routing snapshots by hand (with the loader's derived tables filled)
// and a HealthView over a plain vector, for the selection tests. Generated
// cases need thousands of snapshots; going through TOML for each would test
// the parser more than the selector (decide_config_test.cc does that once).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/snapshot.h"
#include "routing/decide.h"

namespace geogate::routing::testing {

class SnapshotBuilder {
 public:
  SnapshotBuilder() {
    snap_.gateway.location = {50.11, 8.68};  // Frankfurt
    // The cases were written against a 20 ms window: they pin it so that
    // the shipped default (80 ms, chosen with bench/routing) does not move
    // their slack edges. tests/unit/config/defaults_test.cc checks that.
    snap_.routing.latency_slack = config::Millis(20);
  }

  SnapshotBuilder& Edge(double lat, double lon) {
    snap_.gateway.location = {lat, lon};
    return *this;
  }
  SnapshotBuilder& Region(const std::string& name, double lat = 50.11, double lon = 8.68,
                          const std::string& jurisdiction = "EU") {
    config::Region r;
    r.name = name;
    r.jurisdiction = jurisdiction;
    r.location = {lat, lon};
    snap_.region_by_name[name] = snap_.regions.size();
    snap_.regions.push_back(std::move(r));
    return *this;
  }
  SnapshotBuilder& Model(const std::string& name, std::vector<std::string> gpu_preference = {},
                         std::optional<double> min_vram_gb = std::nullopt) {
    config::Model m;
    m.name = name;
    m.gpu_preference = std::move(gpu_preference);
    m.min_vram_gb = min_vram_gb;
    snap_.model_by_name[name] = snap_.models.size();
    snap_.models.push_back(std::move(m));
    return *this;
  }
  /// A backend serving `models` (default: the first model). Returns its index.
  size_t Backend(const std::string& name, const std::string& region,
                 config::Tier tier = config::Tier::kOnDemand, uint32_t capacity = 64,
                 const std::string& gpu = "L4", std::vector<std::string> models = {},
                 double weight = 1, std::optional<double> vram_gb = std::nullopt) {
    config::Backend b;
    b.name = name;
    b.region = region;
    b.region_index = snap_.region_by_name.at(region);
    b.tier = tier;
    b.capacity = capacity;
    b.gpu = gpu;
    b.weight = weight;
    b.vram_gb = vram_gb;
    if (models.empty()) models.push_back(snap_.models.at(0).name);
    b.models = std::move(models);
    size_t idx = snap_.backends.size();
    snap_.backend_by_name[name] = idx;
    snap_.backends.push_back(std::move(b));
    return idx;
  }
  config::Routing& routing() { return snap_.routing; }

  /// The snapshot with backends_by_model derived, as the loader does.
  config::Snapshot Build() const {
    config::Snapshot s = snap_;
    s.backends_by_model.assign(s.models.size(), {});
    for (size_t i = 0; i < s.backends.size(); ++i)
      for (const std::string& m : s.backends[i].models)
        s.backends_by_model[s.model_by_name.at(m)].push_back(i);
    return s;
  }

 private:
  config::Snapshot snap_;
};

/// A backend as the selector sees it when all is well: healthy, measured.
inline BackendObservation Healthy(double rtt_ms = 1, double ttft_ms = -1, uint32_t inflight = 0) {
  BackendObservation o;
  o.state = health::HealthState::kHealthy;
  o.rtt_ms = rtt_ms;
  o.ttft_ms = ttft_ms;
  o.inflight = inflight;
  o.since_healthy_ms = 60'000;
  return o;
}

class VectorHealthView final : public HealthView {
 public:
  explicit VectorHealthView(std::vector<BackendObservation> obs = {}) : obs_(std::move(obs)) {}
  BackendObservation Observe(size_t backend, uint64_t /*model_key*/) const override {
    return backend < obs_.size() ? obs_[backend] : BackendObservation{};
  }
  BackendObservation& operator[](size_t i) {
    if (i >= obs_.size()) obs_.resize(i + 1);
    return obs_[i];
  }
  size_t size() const { return obs_.size(); }

 private:
  std::vector<BackendObservation> obs_;
};

/// Decide for the first model, every region allowed, anonymous tenant.
inline Decision DecideAll(const config::Snapshot& snap, const HealthView& view, uint64_t random = 1,
                          const config::Tenant* tenant = nullptr, size_t model = 0) {
  RequestFacts facts{model, tenant};
  return Decide(snap, facts, snap.AllRegions(), view, random);
}

}  // namespace geogate::routing::testing
