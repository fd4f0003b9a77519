// The trace of one request: which trace it belongs to (the client's, from a
// valid traceparent, or a new one), the server span's id, the span id of the
// upstream attempt in progress (the parent the backend is told), and the
// spans finished so far. Spans are built only when the trace is sampled;
// the context is propagated either way.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tracing/span.h"
#include "tracing/tracer.h"

namespace geogate::tracing {

class RequestTrace {
 public:
  using Clock = std::chrono::steady_clock;

  /// @param parent the client's context when its traceparent was valid.
  /// @param random a source of random bits (new ids).
  template <class Random>
  RequestTrace(const Tracer& tracer, const std::optional<TraceContext>& parent,
               std::string_view tracestate, Random&& random, int64_t start_unix_ns,
               Clock::time_point start)
      : tracer_(tracer), start_unix_ns_(start_unix_ns), start_(start) {
    if (parent) {
      trace_id_ = parent->trace_id;
      parent_span_ = parent->span_id;
      tracestate_ = std::string(tracestate);
    } else {
      uint64_t hi = random();
      trace_id_ = TraceIdFrom(hi, random());
    }
    server_span_ = SpanIdFrom(random());
    sampled_ = tracer.sampler().Sample(parent ? &*parent : nullptr, trace_id_);
  }

  bool sampled() const { return sampled_; }
  uint8_t flags() const { return sampled_ ? kSampledFlag : 0; }
  const TraceId& trace_id() const { return trace_id_; }
  const SpanId& server_span_id() const { return server_span_; }
  const SpanId& client_parent_span_id() const { return parent_span_; }  // zero: none
  const std::string& tracestate() const { return tracestate_; }

  /// A steady-clock instant of this request as Unix nanoseconds.
  int64_t UnixNs(Clock::time_point t) const {
    return start_unix_ns_ +
           std::chrono::duration_cast<std::chrono::nanoseconds>(t - start_).count();
  }

  /// A new child span of the server span, started at `start`.
  Span Child(std::string name, SpanKind kind, SpanId id, Clock::time_point start) const {
    Span s;
    s.trace_id = trace_id_;
    s.span_id = id;
    s.parent_span_id = server_span_;
    s.name = std::move(name);
    s.kind = kind;
    s.start_unix_ns = UnixNs(start);
    return s;
  }

  /// Keeps a finished child span until the request ends.
  void Finish(Span&& child) { children_.push_back(std::move(child)); }

  /// The upstream attempt in progress: its span id is the parent the
  /// backend's traceparent names.
  void BeginAttempt(SpanId id, Clock::time_point at) {
    attempt_span_ = id;
    attempt_start_ = at;
  }
  const SpanId& attempt_span_id() const { return attempt_span_; }
  Clock::time_point attempt_start() const { return attempt_start_; }

  /// "traceparent" for the backend: this trace, the attempt's span.
  std::string UpstreamTraceparent() const {
    return FormatTraceparent(trace_id_, attempt_span_, flags());
  }

  /// The server span: ids and start set, the rest for the caller.
  Span ServerSpan(std::string name) const {
    Span s;
    s.trace_id = trace_id_;
    s.span_id = server_span_;
    s.parent_span_id = parent_span_;
    s.name = std::move(name);
    s.kind = SpanKind::kServer;
    s.start_unix_ns = start_unix_ns_;
    return s;
  }

  /// Hands the children and then `server` to the exporter (sampled traces only).
  void Submit(Span&& server, Clock::time_point now) {
    if (!sampled_) return;
    for (Span& c : children_)
      tracer_.Submit(std::move(c), now);
    children_.clear();
    tracer_.Submit(std::move(server), now);
  }

 private:
  const Tracer& tracer_;
  TraceId trace_id_{};
  SpanId server_span_{};
  SpanId parent_span_{};
  SpanId attempt_span_{};
  std::string tracestate_;
  bool sampled_ = false;
  int64_t start_unix_ns_;
  Clock::time_point start_;
  Clock::time_point attempt_start_{};
  std::vector<Span> children_;
};

}  // namespace geogate::tracing
