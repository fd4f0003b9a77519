#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "proxy/headers.h"
#include "proxy/response_head.h"

using namespace geogate::common;
using namespace geogate::proxy;

namespace {

using FieldList = std::vector<std::pair<std::string, std::string>>;

template <class F>
FieldList ListOf(const F& f) {
  FieldList out;
  for (const auto& e : f)
    out.emplace_back(std::string(e.name_string()), std::string(e.value()));
  std::sort(out.begin(), out.end());
  return out;
}

// Parses serialised fields back with Beast: what a backend or client sees.
template <bool isRequest>
FieldList ParseHead(std::string_view head) {
  http::parser<isRequest, http::empty_body> p;
  p.skip(!isRequest);  // a response head without a body to wait for
  boost::system::error_code ec;
  p.put(boost::asio::buffer(head.data(), head.size()), ec);
  REQUIRE_FALSE(ec);
  REQUIRE(p.is_header_done());
  return ListOf(p.get().base());
}

// A client request's fields with every shape the proxy must drop or rewrite.
Fields ClientRequestFields() {
  Fields in;
  in.set(http::field::host, "edge.example.com");
  in.set(http::field::authorization, "Bearer client-secret");
  in.set(http::field::connection, "keep-alive, X-Hop");
  in.set("X-Hop", "1");
  in.set(http::field::content_type, "application/json");
  in.set(http::field::content_length, "10");
  in.set(http::field::expect, "100-continue");
  in.insert("X-Forwarded-For", "203.0.113.9");
  in.insert("X-Forwarded-For", "198.51.100.2");
  in.set("X-Forwarded-Proto", "http");
  in.set("x-geogate-residency", "EU");
  in.set("X-Request-Id", "spoofed");
  in.set("OpenAI-Organization", "org-1");
  return in;
}

}  // namespace

TEST_CASE("hop-by-hop fields per RFC 9110, including those named in Connection", "[headers]") {
  for (const char* h : {"Connection", "keep-alive", "Proxy-Connection", "TE", "Trailer",
                        "Transfer-Encoding", "Upgrade", "Proxy-Authorization"})
    CHECK(IsHopByHop(h, ""));
  CHECK_FALSE(IsHopByHop("Content-Type", ""));
  CHECK(IsHopByHop("X-Custom", "close, x-custom"));
  CHECK_FALSE(IsHopByHop("X-Custom", "close"));
}

TEST_CASE("upstream request headers: no client key, no hop-by-hop, XFF appended", "[headers]") {
  Fields in = ClientRequestFields();
  http::fields out;
  PrepareUpstreamHeaders(in, out, ForwardInfo{"127.0.0.1", true, "rid-1"});
  CHECK(out.count(http::field::authorization) == 0);
  CHECK(out.count(http::field::connection) == 0);
  CHECK(out.count("X-Hop") == 0);
  CHECK(out.count(http::field::host) == 0);
  CHECK(out.count(http::field::content_length) == 0);
  CHECK(out.count(http::field::expect) == 0);
  CHECK(out.count("x-geogate-residency") == 0);
  CHECK(out[http::field::content_type] == "application/json");
  CHECK(out["OpenAI-Organization"] == "org-1");
  CHECK(out["X-Forwarded-For"] == "203.0.113.9, 198.51.100.2, 127.0.0.1");
  CHECK(out.count("X-Forwarded-For") == 1);
  CHECK(out["X-Forwarded-Proto"] == "https");
  CHECK(out["x-request-id"] == "rid-1");
}

TEST_CASE("backend headers: Host with non-default port, the backend's own key", "[headers]") {
  geogate::config::Backend b;
  b.host = "10.0.1.10";
  b.port = 8000;
  http::fields f;
  f.set(http::field::authorization, "Bearer leftover");
  SetBackendHeaders(f, b);
  CHECK(f[http::field::host] == "10.0.1.10:8000");
  CHECK(f.count(http::field::authorization) == 0);
  b.api_key = "backend-key";
  b.tls = true;
  b.port = 443;
  b.host = "gpu.example.net";
  SetBackendHeaders(f, b);
  CHECK(f[http::field::host] == "gpu.example.net");
  CHECK(f[http::field::authorization] == "Bearer backend-key");
  b.host = "2001:db8::1";
  b.port = 8443;
  SetBackendHeaders(f, b);
  CHECK(f[http::field::host] == "[2001:db8::1]:8443");
}

TEST_CASE("client response headers: framing and hop-by-hop removed, tags added", "[headers]") {
  Fields up;
  up.set(http::field::content_type, "text/event-stream");
  up.set(http::field::transfer_encoding, "chunked");
  up.set(http::field::content_length, "5");
  up.set(http::field::connection, "close");
  up.set("x-geogate-backend", "spoofed");
  up.set("x-request-id", "backend-id");
  up.set("x-gpusim-backend", "b1");
  http::fields out;
  PrepareClientResponseHeaders(up, out, ResponseTags{"fra1", "eu-west", "eu-1", "rid", "eu"});
  CHECK(out.count(http::field::transfer_encoding) == 0);
  CHECK(out.count(http::field::content_length) == 0);
  CHECK(out.count(http::field::connection) == 0);
  CHECK(out["x-geogate-backend"] == "eu-1");
  CHECK(out["x-geogate-region"] == "eu-west");
  CHECK(out["x-geogate-edge"] == "fra1");
  CHECK(out["x-geogate-residency-rule"] == "eu");
  CHECK(out["x-request-id"] == "rid");
  CHECK(out["x-gpusim-backend"] == "b1");
  http::fields no_rule;
  PrepareClientResponseHeaders(up, no_rule, ResponseTags{"fra1", "r", "b", "rid", ""});
  CHECK(no_rule.count("x-geogate-residency-rule") == 0);
}

TEST_CASE("client response: a backend's Access-Control-* fields are dropped", "[headers][cors]") {
  Fields up;
  up.set(http::field::content_type, "application/json");
  up.set("Access-Control-Allow-Origin", "*");  // vLLM's default
  up.set("access-control-allow-credentials", "true");
  up.set("Access-Control-Expose-Headers", "x-secret");
  up.set("access-control-", "kept: no field name after the prefix");
  http::fields out;
  PrepareClientResponseHeaders(up, out, ResponseTags{"fra1", "r", "b", "rid", ""});
  CHECK(out.count(http::field::access_control_allow_origin) == 0);
  CHECK(out.count(http::field::access_control_allow_credentials) == 0);
  CHECK(out.count(http::field::access_control_expose_headers) == 0);
  CHECK(out["content-type"] == "application/json");
  CHECK(out.count("access-control-") == 1);
}

TEST_CASE("headers as text: the same fields as the Beast container, none twice", "[headers]") {
  geogate::config::Backend b;
  b.host = "10.0.1.10";
  b.port = 8000;
  b.api_key = "backend-key";
  ForwardInfo fwd{"127.0.0.1", false, "rid-1"};

  http::fields as_fields;
  PrepareUpstreamHeaders(ClientRequestFields(), as_fields, fwd);
  SetBackendHeaders(as_fields, b);
  PooledString text = "POST /v1/chat/completions HTTP/1.1\r\n";
  HeaderText sink(text);
  SetBackendHeaders(sink, b);
  PrepareUpstreamHeaders(ClientRequestFields(), sink, fwd);
  text += "\r\n";
  CHECK(ParseHead<true>(text) == ListOf(as_fields));

  Fields up;
  up.set(http::field::content_type, "text/event-stream");
  up.set(http::field::transfer_encoding, "chunked");
  up.set(http::field::connection, "close, x-hop");
  up.set("x-hop", "1");
  up.set("x-request-id", "backend-id");
  up.set("x-gpusim-backend", "b1");
  ResponseTags tags{"fra1", "eu-west", "eu-1", "rid", "eu"};
  http::fields client_fields;
  PrepareClientResponseHeaders(up, client_fields, tags);
  client_fields.set(http::field::transfer_encoding, "chunked");
  ResponseHead head(200, "OK", 11);
  PrepareClientResponseHeaders(up, head, tags);
  head.SetFraming(std::nullopt, /*chunked=*/true, /*keep_alive=*/true);
  CHECK(ParseHead<false>(head.text()) == ListOf(client_fields));
}

TEST_CASE("request ids: generated ones are unique hex, client ones validated", "[headers]") {
  GeneratedRequestId ia = NewRequestId(), ib = NewRequestId();
  std::string a(ia.begin(), ia.end()), b(ib.begin(), ib.end());
  CHECK(a.size() == 32);
  CHECK(a != b);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(IsAcceptableRequestId("abc-123_DEF"));
  CHECK_FALSE(IsAcceptableRequestId(""));
  CHECK_FALSE(IsAcceptableRequestId("has space"));
  CHECK_FALSE(IsAcceptableRequestId(std::string(200, 'a')));
  CHECK_FALSE(IsAcceptableRequestId("quote\""));
}
