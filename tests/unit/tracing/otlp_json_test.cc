#include "tracing/otlp_json.h"

#include <boost/json/parse.hpp>
#include <catch2/catch.hpp>

namespace geogate::tracing {
namespace {

namespace json = boost::json;

Span Sample() {
  Span s;
  s.trace_id = TraceIdFrom(0x0102030405060708ULL, 0x090a0b0c0d0e0f10ULL);
  s.span_id = SpanIdFrom(0xaabbccddeeff0011ULL);
  s.parent_span_id = SpanIdFrom(0x1122334455667788ULL);
  s.name = "POST /v1/chat/completions";
  s.kind = SpanKind::kServer;
  s.start_unix_ns = 1700000000123456789;
  s.end_unix_ns = 1700000000223456789;
  s.Set("http.request.method", "POST");
  s.Set("http.response.status_code", int64_t{200});
  s.Set("geogate.ratio", 0.25);
  s.Set("geogate.stream", true);
  s.events.push_back({"first_token", 1700000000173456789, {{"geogate.ttft_ms", 50.0}}});
  return s;
}

const json::value* Attr(const json::value& span, std::string_view key) {
  for (const auto& a : span.at("attributes").as_array())
    if (a.at("key").as_string() == key) return &a.at("value");
  return nullptr;
}

TEST_CASE("an export request has the protobuf JSON mapping's shape") {
  ResourceInfo res;
  res.service_name = "edge-gw";
  res.service_version = "1.2.3";
  res.service_instance = "fra1";
  std::vector<Span> spans{Sample()};
  json::value v = json::parse(EncodeExportRequest(res, spans));
  const auto& rs = v.at("resourceSpans").as_array();
  REQUIRE(rs.size() == 1);
  const auto& rattrs = rs[0].at("resource").at("attributes").as_array();
  REQUIRE(rattrs.size() == 3);
  CHECK(rattrs[0].at("key") == "service.name");
  CHECK(rattrs[0].at("value").at("stringValue") == "edge-gw");
  CHECK(rattrs[2].at("key") == "service.instance.id");
  const auto& ss = rs[0].at("scopeSpans").as_array();
  REQUIRE(ss.size() == 1);
  CHECK(ss[0].at("scope").at("name") == "geogate");
  const auto& out = ss[0].at("spans").as_array();
  REQUIRE(out.size() == 1);
  const json::value& s = out[0];
  CHECK(s.at("traceId") == "0102030405060708090a0b0c0d0e0f10");
  CHECK(s.at("spanId") == "aabbccddeeff0011");
  CHECK(s.at("parentSpanId") == "1122334455667788");
  CHECK(s.at("name") == "POST /v1/chat/completions");
  CHECK(s.at("kind") == 2);
  CHECK(s.at("startTimeUnixNano") == "1700000000123456789");
  CHECK(s.at("endTimeUnixNano") == "1700000000223456789");
  CHECK(Attr(s, "http.request.method")->at("stringValue") == "POST");
  CHECK(Attr(s, "http.response.status_code")->at("intValue") == "200");
  CHECK(Attr(s, "geogate.ratio")->at("doubleValue").as_double() == 0.25);
  CHECK(Attr(s, "geogate.stream")->at("boolValue") == true);
  const auto& ev = s.at("events").as_array();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].at("name") == "first_token");
  CHECK(ev[0].at("timeUnixNano") == "1700000000173456789");
  CHECK_FALSE(s.as_object().contains("status"));
}

TEST_CASE("a root span has no parentSpanId; an error span has status ERROR") {
  Span s = Sample();
  s.parent_span_id = {};
  s.error = true;
  s.status_message = "every backend attempt failed";
  s.attributes.clear();
  s.events.clear();
  std::vector<Span> spans{s};
  json::value v = json::parse(EncodeExportRequest(ResourceInfo{}, spans));
  const json::value& out = v.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").at(0);
  CHECK_FALSE(out.as_object().contains("parentSpanId"));
  CHECK_FALSE(out.as_object().contains("attributes"));
  CHECK(out.at("status").at("code") == 2);
  CHECK(out.at("status").at("message") == "every backend attempt failed");
  CHECK(v.at("resourceSpans").at(0).at("resource").at("attributes").as_array().size() == 1);
}

TEST_CASE("strings are escaped, not trusted") {
  Span s = Sample();
  s.attributes.clear();
  s.Set("geogate.detail", "quote \" backslash \\ newline \n");
  std::vector<Span> spans{s};
  json::value v = json::parse(EncodeExportRequest(ResourceInfo{}, spans));
  const json::value& out = v.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").at(0);
  CHECK(Attr(out, "geogate.detail")->at("stringValue") == "quote \" backslash \\ newline \n");
}

}  // namespace
}  // namespace geogate::tracing
