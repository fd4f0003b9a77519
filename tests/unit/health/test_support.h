// Shared helpers for the health unit tests: hand-built snapshots (the config
// loader is not needed), and a scripted fake ProbeClient driven by
// SimulatedTime.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "config/snapshot.h"
#include "health/health_checker.h"
#include "health/health_table.h"
#include "health/probe_client.h"
#include "testing/simulated_time.h"

namespace geogate::health::testing {

/// A backend named `name` in region `region` at http://10.0.<region>.<i>:8000.
inline config::Backend MakeBackend(const std::string& name, size_t region, int i = 1) {
  config::Backend b;
  b.name = name;
  b.region = "r" + std::to_string(region);
  b.region_index = region;
  b.host = "10.0." + std::to_string(region) + "." + std::to_string(i);
  b.port = 8000;
  b.url = "http://" + b.host + ":8000";
  b.models = {"m"};
  return b;
}

/// A snapshot with the given backends and default [health] settings.
inline std::shared_ptr<config::Snapshot> MakeSnapshot(std::vector<config::Backend> backends) {
  auto s = std::make_shared<config::Snapshot>();
  size_t regions = 0;
  for (const auto& b : backends)
    regions = std::max(regions, b.region_index + 1);
  for (size_t r = 0; r < regions; ++r)
    s->regions.push_back({"r" + std::to_string(r), "J", {}});
  s->backends = std::move(backends);
  for (size_t i = 0; i < s->backends.size(); ++i)
    s->backend_by_name[s->backends[i].name] = i;
  return s;
}

/// What one fake backend answers, changeable at any time by the test.
struct FakeBackend {
  enum class Mode { kOk, kFail, kStall };
  Mode mode = Mode::kOk;
  FailureReason reason = FailureReason::kBadStatus;  // for kFail
  FailureReason timeout_reason = FailureReason::kProbeTimeout;
  Millis delay{5};  // simulated time to answer; 0 = before probe() returns
  std::chrono::microseconds rtt{5000};
  std::optional<LoadReport> load;

  // Observations.
  std::vector<MonotonicTime> probe_starts;
  int cancels = 0;
  int clients = 0;
};

class FakeProbeClient final : public ProbeClient {
 public:
  FakeProbeClient(SimulatedTime& time, FakeBackend& backend)
      : time_(time), backend_(backend), timer_(time.create([this] { answer(); })) {
    ++backend_.clients;
  }

  // health::ProbeClient
  void probe(Callback cb) override {
    backend_.probe_starts.push_back(time_.monotonic());
    cb_ = std::move(cb);
    if (backend_.mode == FakeBackend::Mode::kStall) return;
    if (backend_.delay.count() == 0) {
      answer();
    } else {
      timer_->enable(backend_.delay);
    }
  }
  void cancel() override {
    timer_->disable();
    cb_ = nullptr;
    ++backend_.cancels;
  }
  void close() override {
    timer_->disable();
    cb_ = nullptr;
  }
  FailureReason TimeoutReason() const override { return backend_.timeout_reason; }

 private:
  void answer() {
    if (!cb_) return;
    Callback cb = std::move(cb_);
    cb_ = nullptr;
    switch (backend_.mode) {
      case FakeBackend::Mode::kOk: {
        ProbeResult r = ProbeResult::Ok(backend_.rtt);
        r.load = backend_.load;
        cb(r);
        break;
      }
      case FakeBackend::Mode::kFail:
        cb(ProbeResult::Failed(backend_.reason, 503));
        break;
      case FakeBackend::Mode::kStall:
        break;  // switched to stall while in flight: never answers
    }
  }

  SimulatedTime& time_;
  FakeBackend& backend_;
  TimerPtr timer_;
  Callback cb_;
};

class FakeProbeClientFactory final : public ProbeClientFactory {
 public:
  explicit FakeProbeClientFactory(SimulatedTime& time) : time_(time) {}
  ProbeClientPtr create(const config::Backend& backend, const config::Health&) override {
    return std::make_unique<FakeProbeClient>(time_, backends[backend.name]);
  }
  std::map<std::string, FakeBackend> backends;  // by backend name

 private:
  SimulatedTime& time_;
};

/// A HealthChecker over simulated time and fake clients, bound through a
/// HealthTable as the gateway does it.
struct CheckerRig {
  explicit CheckerRig(uint64_t seed = 1) : rng(seed) {}

  void load(std::shared_ptr<config::Snapshot> s) {
    snapshot = std::move(s);
    states = table.Bind(*snapshot);
    checker.update(*snapshot, states);
  }
  BackendState& state(size_t i) { return *states.at(i); }
  FakeBackend& fake(const std::string& name) { return clients.backends[name]; }
  int64_t nowNs() const { return ToNanos(time.monotonic()); }

  SimulatedTime time;
  FakeProbeClientFactory clients{time};
  std::mt19937_64 rng;
  std::vector<StateChange> changes;
  std::vector<std::pair<std::string, ProbeResult>> probes;
  std::function<void(BackendState&, const ProbeResult&, MonotonicTime)> extra_on_probe;
  HealthChecker checker{
      time, time, clients, [this] { return rng(); },
      HealthChecker::Hooks{
          [this](const BackendState&, const StateChange& c) { changes.push_back(c); },
          [this](BackendState& s, const ProbeResult& r, MonotonicTime started) {
            probes.emplace_back(s.key(), r);
            if (extra_on_probe) extra_on_probe(s, r, started);
          }}};
  HealthTable table;
  std::shared_ptr<config::Snapshot> snapshot;
  std::vector<BackendStatePtr> states;
};

}  // namespace geogate::health::testing
