// Everything one request accumulates as it moves through the phases
// (on_request -> resolve_geo -> select_upstream -> upstream -> log), owned by
// the request handler's coroutine frame.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "accounting/showback_record.h"
#include "common/block_cache.h"
#include "health/time_source.h"
#include "observability/access_log.h"
#include "proxy/session.h"
#include "proxy/tenant_limits.h"
#include "routing/geo_resolver.h"
#include "routing/ip_addr.h"
#include "routing/residency.h"
#include "tracing/request_trace.h"

namespace geogate::proxy {

inline constexpr size_t kNoIndex = std::numeric_limits<size_t>::max();

struct RequestContext {
  RequestContext(Session& s, const PinnedRuntime& p, Request& r)
      : session(s), worker(s.worker()), pinned(p), rt(**p), cfg(*rt.config), req(r) {}

  Session& session;
  Worker& worker;
  PinnedRuntime pinned;  // keeps the snapshot this request started with
  const Runtime& rt;
  const config::Snapshot& cfg;
  Request& req;
  health::MonotonicTime start = worker.time().monotonic();
  common::PooledString request_id;  // 32 characters, or the client's (up to 128)
  std::string_view path;            // normalised path without the query (as sent if refused)
  uint64_t bytes_in = 0;            // request body size (the body itself moves upstream)
  std::unique_ptr<tracing::RequestTrace> trace;  // null unless [tracing] is on (trace_hooks.h)

  // ---- who ------------------------------------------------------------------
  routing::IpAddr client_ip;
  std::string client_ip_text;
  routing::GeoInfo geo;
  size_t tenant = kNoIndex;  // index into cfg.tenants
  TenantSlot tenant_slot;    // the tenant's concurrency slot, held to the request's end
  routing::ResidencyDecision residency;
  bool residency_decided = false;  // ResolveGeo ran: the request counts in the metric

  // ---- what -----------------------------------------------------------------
  size_t model = kNoIndex;  // index into cfg.models
  bool stream = false;
  bool include_usage = false;

  // ---- outcome ----------------------------------------------------------------
  unsigned status = 0;
  observability::RequestOutcome outcome = observability::RequestOutcome::kCompleted;
  std::string_view error_code;
  std::string_view upstream_error;  // why a backend failure ended the request
  size_t backend = kNoIndex;
  double ttft_ms = -1;
  uint64_t bytes_out = 0;
  uint32_t attempts = 0;
  common::PooledString route_reason;  // routing::Decision::AppendReason's text
  // The request-end record of the committed attempt (tokens, GPU-seconds,
  // cost), made once when its relay ends. At the request's end it is
  // charged (showback, metrics, the tenant's budget) and logged as it is.
  // In a cached block (288 bytes), not in the context: a stream holds the
  // context for its whole life, the record exists only at its end.
  common::PooledPtr<accounting::ShowbackRecord> usage;
  // When that record was made (the relay's end): the access log's end of
  // the request and the pooled connection's release time, without another
  // clock read. Unset (the epoch) when nothing was relayed.
  health::MonotonicTime relay_end{};
  /// The request's end: the relay's, else a clock reading now.
  health::MonotonicTime end_time() const {
    return relay_end != health::MonotonicTime{} ? relay_end : worker.time().monotonic();
  }

  const config::Tenant* tenant_config() const {
    return tenant == kNoIndex ? nullptr : &cfg.tenants[tenant];
  }
  /// The request is one of the OpenAI Responses API (POST /v1/responses).
  bool responses_api() const { return path == "/v1/responses"; }
  std::string_view model_name() const {
    return model == kNoIndex ? std::string_view() : std::string_view(cfg.models[model].name);
  }
};

}  // namespace geogate::proxy
