// A finished span as the exporter sends it: ids, times (Unix nanoseconds),
// OpenTelemetry attributes and events, and an error status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tracing/trace_context.h"

namespace geogate::tracing {

// Values of OTLP's SpanKind enum.
enum class SpanKind : uint8_t { kInternal = 1, kServer = 2, kClient = 3 };

using AttributeValue = std::variant<std::string, int64_t, double, bool>;

struct Attribute {
  std::string key;
  AttributeValue value;
};

struct SpanEvent {
  std::string name;
  int64_t time_unix_ns = 0;
  std::vector<Attribute> attributes;
};

struct Span {
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};  // all zero: a root span
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  std::vector<Attribute> attributes;
  std::vector<SpanEvent> events;
  bool error = false;  // OTLP status code ERROR; unset otherwise
  std::string status_message;

  void Set(std::string key, std::string_view v) {
    attributes.push_back({std::move(key), std::string(v)});
  }
  void Set(std::string key, const char* v) { Set(std::move(key), std::string_view(v)); }
  void Set(std::string key, int64_t v) { attributes.push_back({std::move(key), v}); }
  void Set(std::string key, double v) { attributes.push_back({std::move(key), v}); }
  void Set(std::string key, bool v) { attributes.push_back({std::move(key), v}); }
};

}  // namespace geogate::tracing
