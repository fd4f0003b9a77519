#include "proxy/trace_hooks.h"

#include <memory>
#include <string>

#include "routing/residency.h"

namespace geogate::proxy {

namespace {

int64_t UnixNanosNow(const Worker& w) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(w.time().system().time_since_epoch())
      .count();
}

// The client's context: exactly one traceparent that parses (W3C §3.2: more
// than one, or an invalid one, is as if there were none), and its
// tracestate when that is well-formed.
std::optional<tracing::TraceContext> IncomingContext(const Request& req,
                                                     std::string_view& tracestate) {
  auto range = req.equal_range("traceparent");
  if (range.first == range.second || std::next(range.first) != range.second) return std::nullopt;
  std::optional<tracing::TraceContext> parent = tracing::ParseTraceparent(range.first->value());
  if (!parent) return std::nullopt;
  auto states = req.equal_range("tracestate");
  if (states.first != states.second && std::next(states.first) == states.second) {
    if (auto ok = tracing::AcceptableTracestate(states.first->value())) tracestate = *ok;
  }
  return parent;
}

}  // namespace

void StartRequestTrace(RequestContext& ctx) {
  std::string_view tracestate;
  std::optional<tracing::TraceContext> parent = IncomingContext(ctx.req, tracestate);
  Worker& w = ctx.worker;
  int64_t now_unix = UnixNanosNow(w);
  health::MonotonicTime now = w.time().monotonic();
  // The request started at ctx.start: its Unix time is now minus the time since.
  int64_t start_unix =
      now_unix - std::chrono::duration_cast<std::chrono::nanoseconds>(now - ctx.start).count();
  ctx.trace = std::make_unique<tracing::RequestTrace>(
      *ctx.rt.tracer, parent, tracestate, [&w] { return w.Random(); }, start_unix, ctx.start);
}

void TraceRouting(RequestContext& ctx, const routing::Decision& d, health::MonotonicTime start,
                  health::MonotonicTime end) {
  tracing::RequestTrace& t = *ctx.trace;
  if (!t.sampled()) return;
  const config::Snapshot& cfg = ctx.cfg;
  tracing::Span s = t.Child("geogate.route", tracing::SpanKind::kInternal,
                            tracing::SpanIdFrom(ctx.worker.Random()), start);
  s.end_unix_ns = t.UnixNs(end);
  s.Set("geogate.residency.rule", ctx.residency.RuleLabel(cfg));
  s.Set("geogate.residency.allowed_regions", routing::RegionNames(cfg, ctx.residency.allowed));
  s.Set("geogate.residency.reason", ctx.residency.Reason(cfg));
  if (ctx.geo.country[0] != '\0')
    s.Set("geogate.client.country", std::string_view(ctx.geo.country));
  s.Set("geogate.model", ctx.model_name());
  s.Set("geogate.route.outcome", routing::OutcomeName(d.outcome));
  s.Set("geogate.route.why", d.why);
  s.Set("geogate.route.reason", std::string_view(ctx.route_reason));
  s.Set("geogate.route.candidates", static_cast<int64_t>(d.plan.size()));
  if (d.outcome == routing::Outcome::kRoute && !d.plan.empty()) {
    const config::Backend& b = cfg.backends[d.plan[0]];
    s.Set("geogate.backend", b.name);
    s.Set("geogate.region", cfg.regions[b.region_index].name);
  } else {
    s.error = true;
    s.status_message = routing::OutcomeName(d.outcome);
  }
  t.Finish(std::move(s));
}

void BeginAttemptTrace(RequestContext& ctx, health::MonotonicTime at) {
  ctx.trace->BeginAttempt(tracing::SpanIdFrom(ctx.worker.Random()), at);
}

void EndAttemptTrace(RequestContext& ctx, size_t backend, size_t index, bool committed,
                     health::FailureReason failure, std::string_view detail,
                     unsigned upstream_status, health::MonotonicTime end) {
  tracing::RequestTrace& t = *ctx.trace;
  if (!t.sampled()) return;
  const config::Backend& b = ctx.cfg.backends[backend];
  // The committed attempt's status is the response's (the relay's result
  // does not repeat it).
  if (committed && upstream_status == 0) upstream_status = ctx.status;
  tracing::Span s = t.Child(std::string(ctx.req.method_string()), tracing::SpanKind::kClient,
                            t.attempt_span_id(), t.attempt_start());
  s.end_unix_ns = t.UnixNs(end);
  s.Set("http.request.method", ctx.req.method_string());
  s.Set("server.address", b.host);
  s.Set("server.port", static_cast<int64_t>(b.port));
  bool v6 = b.host.find(':') != std::string::npos;
  std::string url = b.tls ? "https://" : "http://";
  url.append(v6 ? "[" : "").append(b.host).append(v6 ? "]:" : ":");
  url.append(std::to_string(b.port)).append(b.base_path).append(ctx.path);
  s.Set("url.full", url);
  s.Set("geogate.backend", b.name);
  s.Set("geogate.region", ctx.cfg.regions[b.region_index].name);
  s.Set("geogate.attempt", static_cast<int64_t>(index + 1));
  if (upstream_status != 0)
    s.Set("http.response.status_code", static_cast<int64_t>(upstream_status));
  if (failure != health::FailureReason::kNone) {
    s.Set("error.type", health::FailureReasonName(failure));
    if (!detail.empty()) s.Set("geogate.failure.detail", detail);
    s.error = true;
    s.status_message = health::FailureReasonName(failure);
  } else if (upstream_status >= 500) {
    s.error = true;
  }
  s.Set("geogate.committed", committed);
  if (committed && ctx.ttft_ms >= 0) {
    // The first token (the first output delta of a Responses stream), as
    // the access log's ttft_ms measures it: from the request's start.
    tracing::SpanEvent ev;
    ev.name = "geogate.first_token";
    ev.time_unix_ns = t.UnixNs(ctx.start) + static_cast<int64_t>(ctx.ttft_ms * 1e6);
    ev.attributes.push_back({"geogate.ttft_ms", ctx.ttft_ms});
    s.events.push_back(std::move(ev));
  }
  t.Finish(std::move(s));
}

void EndRequestTrace(RequestContext& ctx, health::MonotonicTime end) {
  tracing::RequestTrace& t = *ctx.trace;
  if (!t.sampled()) return;
  std::string_view method = ctx.req.method_string();
  // The name is the route, not the raw path, for the API's own paths: an
  // unknown path stays out of span names (their cardinality).
  bool known = ctx.path.starts_with("/v1/") && ctx.status != 404;
  std::string name(method);
  if (known) name.append(" ").append(ctx.path);
  tracing::Span s = t.ServerSpan(std::move(name));
  s.end_unix_ns = t.UnixNs(end);
  s.Set("http.request.method", method);
  s.Set("url.path", ctx.path);
  s.Set("url.scheme", ctx.session.tls() ? "https" : "http");
  s.Set("client.address",
        ctx.client_ip_text.empty() ? ctx.session.peer().ToString() : ctx.client_ip_text);
  s.Set("network.protocol.version", ctx.req.version() == 10 ? "1.0" : "1.1");
  if (ctx.status != 0) s.Set("http.response.status_code", static_cast<int64_t>(ctx.status));
  s.Set("geogate.edge", ctx.cfg.gateway.edge);
  s.Set("geogate.request_id", std::string_view(ctx.request_id));
  s.Set("geogate.outcome", observability::RequestOutcomeName(ctx.outcome));
  if (!ctx.error_code.empty()) s.Set("geogate.error_code", ctx.error_code);
  if (ctx.model != kNoIndex) s.Set("geogate.model", ctx.model_name());
  if (const config::Tenant* tn = ctx.tenant_config()) s.Set("geogate.tenant", tn->name);
  s.Set("geogate.attempts", static_cast<int64_t>(ctx.attempts));
  if (ctx.backend != kNoIndex) {
    const config::Backend& b = ctx.cfg.backends[ctx.backend];
    s.Set("geogate.backend", b.name);
    s.Set("geogate.region", ctx.cfg.regions[b.region_index].name);
  }
  if (ctx.residency_decided) s.Set("geogate.residency.rule", ctx.residency.RuleLabel(ctx.cfg));
  if (ctx.ttft_ms >= 0) s.Set("geogate.ttft_ms", ctx.ttft_ms);
  if (ctx.usage) {
    // Estimated counts come from SSE events alone: the prompt's is unknown.
    if (!ctx.usage->estimated) s.Set("geogate.usage.prompt_tokens", ctx.usage->prompt_tokens);
    s.Set("geogate.usage.completion_tokens", ctx.usage->completion_tokens);
  }
  // OpenTelemetry's HTTP server convention: 5xx is an error of the server,
  // a 4xx the client's.
  if (ctx.status >= 500 || ctx.outcome == observability::RequestOutcome::kInterrupted) {
    s.error = true;
    s.status_message = std::string(ctx.error_code);
  }
  t.Submit(std::move(s), end);
}

}  // namespace geogate::proxy
