#include "server/metrics_exporter.h"

#include "absl/strings/str_cat.h"
#include "routing/decide.h"
#include "routing/live_health_view.h"

namespace geogate::server {

namespace {

std::string CodeClass(std::string_view code) {
  if (code.size() != 3 || code[0] < '1' || code[0] > '5') return "other";
  return std::string(1, code[0]) + "xx";
}

}  // namespace

std::string FormatMetrics(const MetricsInputs& in) {
  observability::PromWriter w;
  const proxy::WorkerMetrics& m = *in.workers;
  const proxy::Runtime& rt = *in.runtime;
  const config::Snapshot& cfg = *rt.config;

  w.Family("geogate_requests_total", "counter",
           "Requests answered, by backend, region, GPU type, provider, model, tenant and status "
           "code (backend \"none\" when the gateway answered itself).");
  w.Counter(
      "geogate_requests_total",
      std::array<const char*, 7>{"backend", "region", "gpu", "provider", "model", "tenant", "code"},
      m.requests);
  observability::CounterVec<1> classes;
  for (const auto& [k, v] : m.requests.values())
    classes.Add({CodeClass(k[6])}, v);
  w.Family("geogate_responses_total", "counter", "Responses by status class.");
  w.Counter("geogate_responses_total", std::array<const char*, 1>{"code_class"}, classes);

  w.Family("geogate_upstream_errors_total", "counter",
           "Failed upstream attempts and mid-stream failures, by backend and reason.");
  w.Counter("geogate_upstream_errors_total", std::array<const char*, 2>{"backend", "reason"},
            m.upstream_errors);
  w.Family("geogate_failovers_total", "counter",
           "Retries on another backend before the first byte, by the reason the previous attempt "
           "failed.");
  w.Counter("geogate_failovers_total", std::array<const char*, 1>{"reason"}, m.failovers);
  w.Family("geogate_retry_budget_exhausted_total", "counter",
           "Retries refused because the process-wide retry budget was spent.");
  w.Sample("geogate_retry_budget_exhausted_total", {},
           static_cast<double>(m.retry_budget_exhausted));
  w.Family("geogate_residency_decisions_total", "counter",
           "Residency decisions by governing rule, outcome (allowed, denied, bad_header) and "
           "reason (none, policy, narrowed_to_nothing, model_outside_allowed, "
           "unknown_jurisdiction).");
  w.Counter("geogate_residency_decisions_total",
            std::array<const char*, 3>{"rule", "outcome", "reason"}, m.residency_decisions);
  w.Family("geogate_tenant_rejections_total", "counter",
           "Requests refused by tenant limits, by tenant and limit (rate, concurrency, budget).");
  w.Counter("geogate_tenant_rejections_total", std::array<const char*, 2>{"tenant", "reason"},
            m.tenant_rejections);
  w.Family("geogate_selections_total", "counter",
           "Backend selections. Routed: why the winner beat the runner-up (only_candidate, "
           "latency, gpu_preference, tier, utilization, runner_up_full, runner_up_unhealthy, "
           "exploration); else the outcome (residency_denied, no_healthy, capacity). See "
           "docs/routing.md.");
  w.Counter("geogate_selections_total", std::array<const char*, 1>{"outcome"}, m.selections);
  w.Family("geogate_tokens_total", "counter",
           "Tokens by backend, model, tenant and kind (prompt, completion).");
  w.Counter("geogate_tokens_total",
            std::array<const char*, 4>{"backend", "model", "tenant", "kind"}, m.tokens);

  w.Family("geogate_ttft_seconds", "histogram",
           "Time from the start of an attempt to the first token (the first response body byte; "
           "for a Responses API stream, its first output delta), by backend.");
  w.Histogram("geogate_ttft_seconds", std::array<const char*, 1>{"backend"}, m.ttft);
  w.Family("geogate_request_duration_seconds", "histogram",
           "Whole request duration including streaming, by backend.");
  w.Histogram("geogate_request_duration_seconds", std::array<const char*, 1>{"backend"},
              m.duration);
  w.Family("geogate_inter_token_gap_seconds", "histogram",
           "Gap between consecutive streamed content events, by backend.");
  w.Histogram("geogate_inter_token_gap_seconds", std::array<const char*, 1>{"backend"},
              m.token_gap);

  // Live per-backend gauges.
  int64_t now = health::ToNanos(std::chrono::steady_clock::now());
  w.Family("geogate_inflight", "gauge", "Requests in flight to a backend (process-wide).");
  for (size_t i = 0; i < cfg.backends.size(); ++i)
    w.Sample("geogate_inflight",
             {{"backend", cfg.backends[i].name},
              {"region", cfg.regions[cfg.backends[i].region_index].name}},
             rt.backends[i]->inflight.load());
  w.Family("geogate_backend_healthy", "gauge",
           "1 when the backend is healthy and not ejected (routable), else 0.");
  for (size_t i = 0; i < cfg.backends.size(); ++i)
    w.Sample("geogate_backend_healthy",
             {{"backend", cfg.backends[i].name},
              {"region", cfg.regions[cfg.backends[i].region_index].name}},
             rt.backends[i]->routable(now) ? 1 : 0);
  w.Family("geogate_backend_state", "gauge", "Health state per backend (1 for the current state).");
  for (size_t i = 0; i < cfg.backends.size(); ++i) {
    health::HealthState st = rt.backends[i]->state.load();
    for (auto s : {health::HealthState::kUnknown, health::HealthState::kHealthy,
                   health::HealthState::kUnhealthy})
      w.Sample("geogate_backend_state",
               {{"backend", cfg.backends[i].name}, {"state", health::HealthStateName(s)}},
               st == s ? 1 : 0);
  }
  w.Family("geogate_backend_ejected", "gauge", "1 while outlier detection keeps the backend out.");
  for (size_t i = 0; i < cfg.backends.size(); ++i)
    w.Sample("geogate_backend_ejected", {{"backend", cfg.backends[i].name}},
             rt.backends[i]->ejected() ? 1 : 0);
  w.Family("geogate_backend_rtt_seconds", "gauge", "Probe round-trip time EWMA per backend.");
  w.Family("geogate_backend_ttft_ewma_seconds", "gauge", "Observed time-to-first-token EWMA.");
  w.Family("geogate_backend_expected_ttft_seconds", "gauge",
           "The selector's expected time to first token per backend.");
  w.Family("geogate_backend_utilization", "gauge",
           "This gateway's in-flight requests / capacity per backend (the selector also reads "
           "the backend's own load report).");
  for (size_t i = 0; i < cfg.backends.size(); ++i) {
    const config::Backend& b = cfg.backends[i];
    routing::BackendObservation o = routing::ObserveState(*rt.backends[i], now);
    if (o.rtt_ms >= 0)
      w.Sample("geogate_backend_rtt_seconds", {{"backend", b.name}}, o.rtt_ms / 1000);
    if (o.ttft_ms >= 0)
      w.Sample("geogate_backend_ttft_ewma_seconds", {{"backend", b.name}}, o.ttft_ms / 1000);
    w.Sample("geogate_backend_expected_ttft_seconds", {{"backend", b.name}},
             routing::ExpectedTtftMs(cfg, i, o) / 1000);
    w.Sample("geogate_backend_utilization",
             {{"backend", b.name},
              {"region", cfg.regions[b.region_index].name},
              {"gpu", b.gpu},
              {"provider", b.provider},
              {"tier", config::TierName(b.tier)}},
             static_cast<double>(o.inflight) / b.capacity);
  }

  w.Family("geogate_residency_rule_available", "gauge",
           "1 when at least one routable backend exists in the rule's allowed regions: 0 means "
           "its clients get 503 no_compliant_backend.");
  for (const config::ResidencyRule& rule : cfg.residency) {
    bool available = false;
    for (size_t i = 0; i < cfg.backends.size() && !available; ++i)
      available =
          rule.allowed.contains(cfg.backends[i].region_index) && rt.backends[i]->routable(now);
    w.Sample("geogate_residency_rule_available", {{"rule", rule.name}}, available ? 1 : 0);
  }

  // Health thread counters.
  w.Family("geogate_probes_total", "counter", "Active health probes by backend and result.");
  for (const auto& h : in.health) {
    w.Sample("geogate_probes_total", {{"backend", h.name}, {"result", "ok"}},
             static_cast<double>(h.probes_ok));
    for (size_t r = 1; r < static_cast<size_t>(health::FailureReason::kCount); ++r)
      if (h.probe_failures[r] != 0)
        w.Sample("geogate_probes_total",
                 {{"backend", h.name},
                  {"result", health::FailureReasonName(static_cast<health::FailureReason>(r))}},
                 static_cast<double>(h.probe_failures[r]));
  }
  w.Family("geogate_probe_rtt_seconds", "histogram", "Active probe round-trip time per backend.");
  for (const auto& h : in.health) {
    if (h.rtt_buckets.empty()) continue;
    uint64_t cum = 0, count = 0;
    for (uint64_t c : h.rtt_buckets)
      count += c;
    size_t nb = std::size(health::kProbeRttBucketsMs);
    for (size_t b = 0; b < h.rtt_buckets.size() && b <= nb; ++b) {
      cum += h.rtt_buckets[b];
      std::string le =
          b < nb ? observability::FormatValue(health::kProbeRttBucketsMs[b] / 1000) : "+Inf";
      w.Sample("geogate_probe_rtt_seconds_bucket", {{"backend", h.name}, {"le", le}},
               static_cast<double>(cum));
    }
    w.Sample("geogate_probe_rtt_seconds_sum", {{"backend", h.name}}, h.rtt_sum_seconds);
    w.Sample("geogate_probe_rtt_seconds_count", {{"backend", h.name}}, static_cast<double>(count));
  }
  w.Family("geogate_ejections_total", "counter", "Outlier ejections per backend.");
  for (const auto& h : in.health)
    w.Sample("geogate_ejections_total", {{"backend", h.name}}, static_cast<double>(h.ejections));
  w.Family("geogate_backend_state_changes_total", "counter", "Health state changes per backend.");
  for (const auto& h : in.health)
    w.Sample("geogate_backend_state_changes_total", {{"backend", h.name}},
             static_cast<double>(h.state_changes));

  // Config and lifecycle.
  w.Family("geogate_config_reloads_total", "counter", "Configuration reloads by result.");
  w.Sample("geogate_config_reloads_total", {{"result", "success"}},
           static_cast<double>(in.reloads_ok));
  w.Sample("geogate_config_reloads_total", {{"result", "failure"}},
           static_cast<double>(in.reloads_failed));
  w.Family("geogate_config_last_reload_success_timestamp_seconds", "gauge",
           "When the running configuration was loaded successfully.");
  w.Sample("geogate_config_last_reload_success_timestamp_seconds", {},
           static_cast<double>(in.last_reload_ok_unix));
  w.Family("geogate_config_last_reload_failure_timestamp_seconds", "gauge",
           "When a reload was last rejected (0 = never); newer than the last success means "
           "the file on disk is not what runs.");
  w.Sample("geogate_config_last_reload_failure_timestamp_seconds", {},
           static_cast<double>(in.last_reload_failed_unix));
  w.Family("geogate_config_generation", "gauge", "Generation of the running configuration.");
  w.Sample("geogate_config_generation", {}, static_cast<double>(rt.generation));
  w.Family("geogate_config_info", "gauge", "The running configuration (value is always 1).");
  w.Sample("geogate_config_info", {{"hash", cfg.hash}, {"edge", cfg.gateway.edge}}, 1);
  w.Family("geogate_ready", "gauge", "1 when /readyz answers 200.");
  w.Sample("geogate_ready", {}, in.ready ? 1 : 0);
  w.Family("geogate_draining", "gauge", "1 while the edge drains.");
  w.Sample("geogate_draining", {}, in.draining ? 1 : 0);
  w.Family("geogate_connections_open", "gauge", "Open client connections.");
  w.Sample("geogate_connections_open", {}, static_cast<double>(in.open_connections));
  w.Family("geogate_connections_idle", "gauge",
           "Open client connections waiting for their client's next request.");
  w.Sample("geogate_connections_idle", {}, static_cast<double>(m.connections_idle));
  w.Family("geogate_connections_total", "counter", "Client connections by event.");
  w.Sample("geogate_connections_total", {{"event", "accepted"}},
           static_cast<double>(m.connections_accepted));
  w.Sample("geogate_connections_total", {{"event", "closed"}},
           static_cast<double>(m.connections_closed));
  w.Sample("geogate_connections_total", {{"event", "rejected"}},
           static_cast<double>(m.connections_rejected + m.connections_rejected_per_ip));
  w.Sample("geogate_connections_total", {{"event", "evicted"}},
           static_cast<double>(m.connections_evicted));
  w.Sample("geogate_connections_total", {{"event", "parked"}},
           static_cast<double>(m.connections_parked));
  w.Family("geogate_connection_rejections_total", "counter",
           "New client connections answered 503 (or closed) by limit.");
  w.Sample("geogate_connection_rejections_total", {{"reason", "max_connections"}},
           static_cast<double>(m.connections_rejected));
  w.Sample("geogate_connection_rejections_total", {{"reason", "max_connections_per_ip"}},
           static_cast<double>(m.connections_rejected_per_ip));
  w.Family("geogate_client_timeouts_total", "counter",
           "Requests answered 408 because the client was too slow, by phase.");
  w.Sample("geogate_client_timeouts_total", {{"phase", "header"}},
           static_cast<double>(m.header_timeouts));
  w.Sample("geogate_client_timeouts_total", {{"phase", "body"}},
           static_cast<double>(m.body_timeouts));
  w.Family("geogate_active_requests", "gauge", "Requests being handled.");
  w.Sample("geogate_active_requests", {}, static_cast<double>(in.active_requests));
  w.Family("geogate_active_streams", "gauge", "SSE streams being relayed.");
  w.Sample("geogate_active_streams", {}, static_cast<double>(in.active_streams));
  w.Family("geogate_tls_handshakes_total", "counter",
           "TLS handshakes on client listeners by result.");
  w.Sample("geogate_tls_handshakes_total", {{"result", "success"}},
           static_cast<double>(m.tls_handshakes));
  w.Sample("geogate_tls_handshakes_total", {{"result", "failure"}},
           static_cast<double>(m.tls_handshake_failures));
  w.Family("geogate_tls_resumed_handshakes_total", "counter",
           "Successful TLS handshakes on client listeners that resumed a session (a ticket) "
           "instead of a full handshake; counted in geogate_tls_handshakes_total too.");
  w.Sample("geogate_tls_resumed_handshakes_total", {}, static_cast<double>(m.tls_resumed));
  w.Family("geogate_proxy_protocol_failures_total", "counter",
           "Connections closed for a missing or malformed PROXY protocol header.");
  w.Sample("geogate_proxy_protocol_failures_total", {},
           static_cast<double>(m.proxy_protocol_failures));
  w.Family("geogate_streams_interrupted_total", "counter",
           "Responses cut by a backend failure after streaming started.");
  w.Sample("geogate_streams_interrupted_total", {}, static_cast<double>(m.streams_interrupted));
  w.Family("geogate_client_disconnects_total", "counter",
           "Requests whose client went away before the response ended (upstream cancelled).");
  w.Sample("geogate_client_disconnects_total", {}, static_cast<double>(m.client_disconnects));
  w.Family("geogate_bytes_total", "counter", "Body bytes received from and sent to clients.");
  w.Sample("geogate_bytes_total", {{"direction", "in"}}, static_cast<double>(m.bytes_in));
  w.Sample("geogate_bytes_total", {{"direction", "out"}}, static_cast<double>(m.bytes_out));
  w.Family("geogate_access_log_dropped_batches_total", "counter",
           "Access-log batches dropped because the writer fell behind.");
  w.Sample("geogate_access_log_dropped_batches_total", {},
           static_cast<double>(in.access_log_dropped));
  w.Family("geogate_trace_spans_exported_total", "counter",
           "Spans the OTLP collector accepted (docs/tracing.md).");
  w.Sample("geogate_trace_spans_exported_total", {}, static_cast<double>(in.trace_spans_exported));
  w.Family("geogate_trace_spans_dropped_total", "counter",
           "Spans dropped instead of exported: the queue was full, or the export request failed.");
  w.Sample("geogate_trace_spans_dropped_total", {{"reason", "queue_full"}},
           static_cast<double>(in.trace_spans_dropped_queue_full));
  w.Sample("geogate_trace_spans_dropped_total", {{"reason", "export_failed"}},
           static_cast<double>(in.trace_spans_dropped_export_failed));

  if (in.listeners != nullptr) {
    w.Family("geogate_tls_certificate_expiry_timestamp_seconds", "gauge",
             "notAfter of the certificate each TLS listener presents.");
    for (size_t i = 0; i < in.listeners->size() && i < rt.listener_tls.size(); ++i) {
      if (!rt.listener_tls[i]) continue;
      w.Sample("geogate_tls_certificate_expiry_timestamp_seconds",
               {{"listener", (*in.listeners)[i].address}},
               static_cast<double>(proxy::CertificateNotAfter(*rt.listener_tls[i])));
    }
  }
  w.Family("geogate_geo_database_build_timestamp_seconds", "gauge",
           "Build time of the loaded geo database (0 when none).");
  w.Sample("geogate_geo_database_build_timestamp_seconds", {}, static_cast<double>(rt.geo_epoch));
  if (rt.geo) {
    routing::GeoDbInfo info = rt.geo->Info();
    w.Family("geogate_geo_database_info", "gauge", "The loaded geo database (value is always 1).");
    w.Sample("geogate_geo_database_info", {{"type", info.database_type}, {"path", info.path}}, 1);
  }
  w.Family("geogate_geo_database_reload_failures_total", "counter",
           "Reloads whose geo database could not be opened or used (same path: the loaded "
           "database kept serving; a new path: the reload was refused).");
  w.Sample("geogate_geo_database_reload_failures_total", {},
           static_cast<double>(in.geo_reload_failures));
  return w.Take();
}

}  // namespace geogate::server
