#include "tracing/otlp_json.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "common/json.h"

namespace geogate::tracing {
namespace {

namespace json = boost::json;

json::object AnyValue(const AttributeValue& v) {
  json::object out;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>)
          out["stringValue"] = x;
        else if constexpr (std::is_same_v<T, bool>)
          out["boolValue"] = x;
        else if constexpr (std::is_same_v<T, int64_t>)
          out["intValue"] = std::to_string(x);  // int64 is a string in proto JSON
        else
          out["doubleValue"] = x;
      },
      v);
  return out;
}

json::array Attributes(const std::vector<Attribute>& attrs) {
  json::array out;
  out.reserve(attrs.size());
  for (const Attribute& a : attrs)
    out.push_back(json::object{{"key", a.key}, {"value", AnyValue(a.value)}});
  return out;
}

json::object SpanJson(const Span& s) {
  json::object o;
  o["traceId"] = Hex(s.trace_id);
  o["spanId"] = Hex(s.span_id);
  if (!IsZero(s.parent_span_id)) o["parentSpanId"] = Hex(s.parent_span_id);
  o["name"] = s.name;
  o["kind"] = static_cast<int>(s.kind);
  o["startTimeUnixNano"] = std::to_string(s.start_unix_ns);
  o["endTimeUnixNano"] = std::to_string(s.end_unix_ns);
  if (!s.attributes.empty()) o["attributes"] = Attributes(s.attributes);
  if (!s.events.empty()) {
    json::array events;
    for (const SpanEvent& e : s.events) {
      json::object ev{{"timeUnixNano", std::to_string(e.time_unix_ns)}, {"name", e.name}};
      if (!e.attributes.empty()) ev["attributes"] = Attributes(e.attributes);
      events.push_back(std::move(ev));
    }
    o["events"] = std::move(events);
  }
  if (s.error) {
    json::object status{{"code", 2}};  // STATUS_CODE_ERROR
    if (!s.status_message.empty()) status["message"] = s.status_message;
    o["status"] = std::move(status);
  }
  return o;
}

}  // namespace

std::string EncodeExportRequest(const ResourceInfo& resource, std::span<const Span> spans) {
  std::vector<Attribute> res{{"service.name", resource.service_name}};
  if (!resource.service_version.empty())
    res.push_back({"service.version", resource.service_version});
  if (!resource.service_instance.empty())
    res.push_back({"service.instance.id", resource.service_instance});
  json::array span_array;
  span_array.reserve(spans.size());
  for (const Span& s : spans)
    span_array.push_back(SpanJson(s));
  json::object scope{{"name", "geogate"}};
  if (!resource.service_version.empty()) scope["version"] = resource.service_version;
  json::object scope_spans{{"scope", std::move(scope)}, {"spans", std::move(span_array)}};
  json::object resource_spans{{"resource", json::object{{"attributes", Attributes(res)}}},
                              {"scopeSpans", json::array{std::move(scope_spans)}}};
  json::object root{{"resourceSpans", json::array{std::move(resource_spans)}}};
  return common::SerializeJson(root);
}

}  // namespace geogate::tracing
