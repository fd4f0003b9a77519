#include "health/probe_session.h"

#include <algorithm>

#include "health/ewma.h"
#include "health/jitter.h"

namespace geogate::health {
namespace {

// Fields whose change means a different probe, hence a new client. The URL
// parts are not here: a new URL is a new state_key and so a new session.
bool SameProbeTarget(const ProbeSession::Settings& a, const ProbeSession::Settings& b) {
  return a.health.path == b.health.path && a.health.timeout == b.health.timeout &&
         a.health.load_report == b.health.load_report && a.backend.ca_file == b.backend.ca_file &&
         a.backend.tls_verify == b.backend.tls_verify && a.backend.host == b.backend.host &&
         a.backend.port == b.backend.port && a.backend.tls == b.backend.tls &&
         a.backend.base_path == b.backend.base_path;
}

}  // namespace

ProbeSession::ProbeSession(ProbeContext& ctx, BackendStatePtr state, Settings settings)
    : ctx_(ctx),
      state_(std::move(state)),
      settings_(std::move(settings)),
      tracker_(settings_.health.healthy_threshold, settings_.health.unhealthy_threshold) {
  // A state carried over from before a restart of the session (reload of a
  // backend whose session was dropped) keeps its verdict.
  const HealthState carried = state_->state.load(std::memory_order_relaxed);
  if (carried == HealthState::kHealthy) {
    tracker_.observe(true);
  } else if (carried == HealthState::kUnhealthy) {
    tracker_.observe(false);
  }
  interval_timer_ = ctx_.timers.create([this] { OnInterval(); });
  timeout_timer_ = ctx_.timers.create([this] { OnTimeout(); });
  client_ = ctx_.clients.create(settings_.backend, settings_.health);
}

ProbeSession::~ProbeSession() {
  // The client first: after this no probe callback can reach the session.
  if (client_) client_->close();
  client_.reset();
  interval_timer_.reset();
  timeout_timer_.reset();
}

void ProbeSession::start() {
  interval_timer_->enable(InitialDelay(settings_.health.interval, ctx_.random()));
}

void ProbeSession::reconfigure(Settings settings) {
  const bool new_client = !SameProbeTarget(settings_, settings);
  settings_ = std::move(settings);
  tracker_.SetThresholds(settings_.health.healthy_threshold, settings_.health.unhealthy_threshold);
  if (!new_client) return;
  AbandonProbe();
  client_ = ctx_.clients.create(settings_.backend, settings_.health);
  interval_timer_->enable(InitialDelay(settings_.health.interval, ctx_.random()));
}

void ProbeSession::AbandonProbe() {
  if (!in_flight_) return;
  in_flight_ = false;
  ++seq_;
  timeout_timer_->disable();
  client_->cancel();
}

void ProbeSession::HardFailure(FailureReason reason) {
  const HealthState before = tracker_.state();
  const Transition t = tracker_.HardFailure();
  const int64_t now_ns = ToNanos(ctx_.time.monotonic());
  if (t == Transition::kChanged) {
    PublishChange(before, reason, now_ns);
  } else {
    state_->reason.store(reason, std::memory_order_relaxed);
  }
  // Count the way back from probes started after the failure only.
  AbandonProbe();
  interval_timer_->enable(JitteredInterval(settings_.health.changing_interval,
                                           settings_.health.jitter_percent, ctx_.random()));
}

void ProbeSession::OnInterval() {
  if (in_flight_) return;
  in_flight_ = true;
  started_ = ctx_.time.monotonic();
  const uint64_t seq = ++seq_;
  ++seq_started_;
  timeout_timer_->enable(settings_.health.timeout);
  // The client may answer before probe() returns; complete() copes.
  client_->probe([this, seq](const ProbeResult& result) {
    if (seq != seq_ || !in_flight_) return;  // abandoned or timed out already
    complete(result);
  });
}

void ProbeSession::OnTimeout() {
  if (!in_flight_) return;
  // Ask before cancelling: the client knows whether it was still connecting.
  const FailureReason reason = client_->TimeoutReason();
  AbandonProbe();
  complete(ProbeResult::Failed(reason));
}

void ProbeSession::complete(const ProbeResult& result) {
  in_flight_ = false;
  timeout_timer_->disable();
  const int64_t now_ns = ToNanos(ctx_.time.monotonic());
  BackendState& s = *state_;

  const HealthState before = tracker_.state();
  // A refused connection proves nothing listens: down at once, as when a
  // worker sees it (outlier_detector.h), not after unhealthy_threshold.
  const bool refused = !result.ok && result.reason == FailureReason::kConnectRefused;
  const Transition t = refused ? tracker_.HardFailure() : tracker_.observe(result.ok);
  const bool changed = t == Transition::kChanged;

  if (result.ok) {
    s.probe_failures.store(0, std::memory_order_relaxed);
    // A backend that just came back restarts its RTT average from this
    // sample: what it measured before the outage says nothing now.
    const int64_t prev = changed ? -1 : s.rtt_ewma_us.load(std::memory_order_relaxed);
    s.rtt_ewma_us.store(EwmaNext(prev, result.rtt.count(), settings_.ewma_alpha),
                        std::memory_order_relaxed);
    if (result.load) {
      s.load_queue_depth.store(result.load->queue_depth, std::memory_order_relaxed);
      s.load_inflight.store(result.load->inflight, std::memory_order_relaxed);
      s.load_kv_util.store(result.load->kv_cache_utilization, std::memory_order_relaxed);
      s.load_at_ns.store(now_ns, std::memory_order_release);
    }
  } else {
    s.probe_failures.fetch_add(1, std::memory_order_relaxed);
  }

  if (changed) {
    PublishChange(before, result.ok ? FailureReason::kNone : result.reason, now_ns);
  } else if (!result.ok && tracker_.state() == HealthState::kUnhealthy) {
    s.reason.store(result.reason, std::memory_order_relaxed);  // the current cause
  }
  if (ctx_.on_probe) ctx_.on_probe(s, result, started_);
  // A probe that timed out while the verdict is in doubt is confirmed by the
  // next one at once: the timeout itself was the wait. With the defaults a
  // stalled backend is then out after ~jitter + 2 x timeout (median ~450 ms)
  // instead of also waiting changing_interval between the two.
  const bool timed_out = !result.ok && (result.reason == FailureReason::kProbeTimeout ||
                                        result.reason == FailureReason::kConnectTimeout);
  ScheduleNext(timed_out && tracker_.changing());
}

void ProbeSession::PublishChange(HealthState from, FailureReason reason, int64_t now_ns) {
  BackendState& s = *state_;
  const HealthState to = tracker_.state();
  if (to == HealthState::kHealthy) {
    // DESIGN.md §7: a returning backend's TTFT estimate restarts from its
    // probe RTT, so a slow sample taken during the outage never strands it.
    s.ResetTtft();
    const bool ejected = s.ejected_until_ns.load(std::memory_order_relaxed) != 0;
    s.reason.store(ejected ? FailureReason::kEjected : FailureReason::kNone,
                   std::memory_order_relaxed);
  } else {
    s.reason.store(reason, std::memory_order_relaxed);
  }
  s.since_ns.store(now_ns, std::memory_order_relaxed);
  // Release: a worker that sees the new state also sees the fields above.
  s.state.store(to, std::memory_order_release);
  if (ctx_.on_change) {
    ctx_.on_change(s, StateChange{settings_.backend.name, from, to, reason, false});
  }
}

void ProbeSession::ScheduleNext(bool immediately) {
  const config::Health& h = settings_.health;
  if (immediately) {
    interval_timer_->enable(Millis(0));
    return;
  }
  // Faster while the verdict is in doubt or bad: a pending flip is confirmed
  // (or refuted) sooner, and a recovered backend returns sooner.
  const bool changing = tracker_.changing() || tracker_.state() != HealthState::kHealthy;
  Millis wait = JitteredInterval(changing ? h.changing_interval : h.interval, h.jitter_percent,
                                 ctx_.random());
  const int64_t until = state_->ejected_until_ns.load(std::memory_order_relaxed);
  if (until != 0) {
    // Ejected: the way back is a probe started at or after the expiry, so
    // aim one at the expiry and probe fast once it has passed.
    const int64_t now_ns = ToNanos(ctx_.time.monotonic());
    if (until > now_ns) {
      const int64_t to_expiry_ms = (until - now_ns + 999'999) / 1'000'000;
      wait = std::min(wait, Millis(to_expiry_ms));
    } else {
      wait = std::min(wait, JitteredInterval(h.changing_interval, h.jitter_percent, ctx_.random()));
    }
  }
  interval_timer_->enable(wait);
}

}  // namespace geogate::health
