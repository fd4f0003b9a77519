// The metric families a worker counts on the request path (see metrics.h for
// why they are per worker). Names and labels are documented in
// docs/observability.md.
#pragma once

#include <cstdint>

#include "accounting/showback_counters.h"
#include "observability/metrics.h"

namespace geogate::proxy {

struct WorkerMetrics {
  // geogate_requests_total{backend,region,gpu,provider,model,tenant,code}
  observability::CounterVec<7> requests;
  // geogate_upstream_errors_total{backend,reason}
  observability::CounterVec<2> upstream_errors;
  // geogate_failovers_total{reason}
  observability::CounterVec<1> failovers;
  // geogate_residency_decisions_total{rule,outcome,reason}
  observability::CounterVec<3> residency_decisions;
  // geogate_tenant_rejections_total{tenant,reason}
  observability::CounterVec<2> tenant_rejections;
  // geogate_selections_total{reason}
  observability::CounterVec<1> selections;
  // geogate_tokens_total{backend,model,tenant,kind}
  observability::CounterVec<4> tokens;
  // geogate_ttft_seconds{backend}, geogate_request_duration_seconds{backend},
  // geogate_inter_token_gap_seconds{backend}
  observability::HistogramVec<1> ttft{observability::LatencyBuckets()};
  observability::HistogramVec<1> duration{observability::LatencyBuckets()};
  observability::HistogramVec<1> token_gap{observability::TokenGapBuckets()};
  // geogate_gpu_seconds_total, geogate_cost_dollars_total {tenant,backend,model}
  accounting::ShowbackCounters showback;

  uint64_t connections_accepted = 0;
  uint64_t connections_closed = 0;
  uint64_t connections_rejected = 0;         // over max_connections, nothing idle to close
  uint64_t connections_rejected_per_ip = 0;  // over max_connections_per_ip
  uint64_t connections_evicted = 0;          // idle ones closed to make room under max_connections
  uint64_t connections_parked = 0;           // idle ones that gave up their frames (RequestPark)
  uint64_t connections_idle = 0;  // a gauge: filled in when the worker's metrics are copied
  uint64_t header_timeouts = 0;   // 408 header_timeout
  uint64_t body_timeouts = 0;     // 408 body_timeout
  uint64_t tls_handshakes = 0;
  uint64_t tls_handshake_failures = 0;
  uint64_t tls_resumed = 0;  // successful handshakes that resumed a session (ticket)
  uint64_t proxy_protocol_failures = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t streams_interrupted = 0;
  uint64_t client_disconnects = 0;
  uint64_t retry_budget_exhausted = 0;
  uint64_t active_streams = 0;  // gauge

  void MergeInto(WorkerMetrics& out) const {
    requests.MergeInto(out.requests);
    upstream_errors.MergeInto(out.upstream_errors);
    failovers.MergeInto(out.failovers);
    residency_decisions.MergeInto(out.residency_decisions);
    tenant_rejections.MergeInto(out.tenant_rejections);
    selections.MergeInto(out.selections);
    tokens.MergeInto(out.tokens);
    ttft.MergeInto(out.ttft);
    duration.MergeInto(out.duration);
    token_gap.MergeInto(out.token_gap);
    showback.MergeInto(out.showback);
    out.connections_accepted += connections_accepted;
    out.connections_closed += connections_closed;
    out.connections_rejected += connections_rejected;
    out.connections_rejected_per_ip += connections_rejected_per_ip;
    out.connections_evicted += connections_evicted;
    out.connections_parked += connections_parked;
    out.connections_idle += connections_idle;
    out.header_timeouts += header_timeouts;
    out.body_timeouts += body_timeouts;
    out.tls_handshakes += tls_handshakes;
    out.tls_handshake_failures += tls_handshake_failures;
    out.tls_resumed += tls_resumed;
    out.proxy_protocol_failures += proxy_protocol_failures;
    out.bytes_in += bytes_in;
    out.bytes_out += bytes_out;
    out.streams_interrupted += streams_interrupted;
    out.client_disconnects += client_disconnects;
    out.retry_budget_exhausted += retry_budget_exhausted;
    out.active_streams += active_streams;
  }
};

}  // namespace geogate::proxy
