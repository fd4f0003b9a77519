// OpenTelemetry spans of a request (docs/tracing.md), at four points of the
// phases: the request's start and end (the server span), the routing
// decision, and each upstream attempt (a client span, whose id the backend
// gets as its parent in `traceparent`). Every hook is called only when the
// request has a trace (ctx.trace), so with [tracing] off the request path
// pays one branch per point.
#pragma once

#include <cstdint>
#include <string_view>

#include "health/health_service.h"
#include "proxy/request_context.h"
#include "routing/decide.h"
#include "tracing/request_trace.h"

namespace geogate::proxy {

/// on_request: joins the client's trace (a valid traceparent) or starts
/// one. Called when the runtime has a tracer.
void StartRequestTrace(RequestContext& ctx);
/// log: the server span, and the request's spans handed to the exporter.
void EndRequestTrace(RequestContext& ctx, health::MonotonicTime end);
/// select_upstream: the routing span (residency rule, allowed regions, the
/// outcome, the chosen backend and region and why).
void TraceRouting(RequestContext& ctx, const routing::Decision& d, health::MonotonicTime start,
                  health::MonotonicTime end);
/// Before an attempt's head is built: a new span id for it.
void BeginAttemptTrace(RequestContext& ctx, health::MonotonicTime at);
/// After the attempt (for the committed one, after its relay).
void EndAttemptTrace(RequestContext& ctx, size_t backend, size_t index, bool committed,
                     health::FailureReason failure, std::string_view detail,
                     unsigned upstream_status, health::MonotonicTime end);

/// traceparent (and tracestate) for the backend: this trace, the attempt's span.
template <class Out>
void SetUpstreamTraceHeaders(const tracing::RequestTrace& trace, Out& out) {
  out.set("traceparent", trace.UpstreamTraceparent());
  if (!trace.tracestate().empty()) out.set("tracestate", trace.tracestate());
}

}  // namespace geogate::proxy
