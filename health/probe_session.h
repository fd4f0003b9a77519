// One probe session per backend (STYLE.md point 4): its own interval and
// timeout timers, its own ProbeClient (and so its own keep-alive connection),
// its HealthTracker, and the BackendState it publishes to. Owned by the
// HealthChecker; runs entirely on the health thread.
#pragma once

#include <cstdint>
#include <functional>

#include "config/snapshot.h"
#include "health/backend_state.h"
#include "health/health_service.h"
#include "health/health_tracker.h"
#include "health/probe_client.h"
#include "health/time_source.h"

namespace geogate::health {

/// What sessions share, owned by the HealthChecker.
struct ProbeContext {
  const TimeSource& time;
  TimerFactory& timers;
  ProbeClientFactory& clients;
  std::function<uint64_t()> random;
  /// Every state change the probes decide (probe verdicts and hard failures).
  std::function<void(const BackendState&, const StateChange&)> on_change;
  /// Every completed probe, after its result is published (stats, and the
  /// outlier detector's post-ejection check).
  std::function<void(BackendState&, const ProbeResult&, MonotonicTime started)> on_probe;
};

class ProbeSession {
 public:
  struct Settings {
    config::Backend backend;
    config::Health health;
    double ewma_alpha = 0.3;
  };

  ProbeSession(ProbeContext& ctx, BackendStatePtr state, Settings settings);
  ~ProbeSession();
  ProbeSession(const ProbeSession&) = delete;
  ProbeSession& operator=(const ProbeSession&) = delete;

  /// Arms the first probe after an initial jitter in [0, interval).
  void start();
  /// Applies new settings (reload) without touching the health verdict. A
  /// change to what is probed (path, timeout, TLS settings, load report)
  /// abandons the probe in flight and starts a new client.
  void reconfigure(Settings settings);
  /// A failure that proves the backend down (connection refused seen by a
  /// worker): unhealthy at once, then `healthy_threshold` fresh probes to
  /// return. The probe in flight, if any, started before and is abandoned.
  void HardFailure(FailureReason reason);

  const HealthTracker& tracker() const { return tracker_; }
  const BackendStatePtr& state() const { return state_; }
  const Settings& settings() const { return settings_; }
  bool probing() const { return in_flight_; }
  /// Probes started since the session was created.
  uint64_t probes_started() const { return seq_started_; }

 private:
  void OnInterval();
  void OnTimeout();
  void complete(const ProbeResult& result);
  void PublishChange(HealthState from, FailureReason reason, int64_t now_ns);
  /// Arms the next probe; `immediately` skips the wait (a timed-out probe
  /// whose verdict is pending).
  void ScheduleNext(bool immediately = false);
  void AbandonProbe();

  ProbeContext& ctx_;
  BackendStatePtr state_;
  Settings settings_;
  HealthTracker tracker_;
  TimerPtr interval_timer_;
  TimerPtr timeout_timer_;
  ProbeClientPtr client_;
  bool in_flight_ = false;
  MonotonicTime started_{};
  uint64_t seq_ = 0;  // identifies the probe in flight; late answers carry an old one
  uint64_t seq_started_ = 0;
};

}  // namespace geogate::health
