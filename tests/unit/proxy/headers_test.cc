#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "proxy/headers.h"

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
  in.set(http::field::accept_encoding, "gzip, deflate, br");  // what the SDKs send
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
  // The gateway reads every answer (usage, SSE events): the backend is
  // asked for it unencoded, whatever the client accepts. Without the
  // field at all, any coding would be acceptable (RFC 9110 12.5.3).
  CHECK(out.count(http::field::accept_encoding) == 1);
  CHECK(out[http::field::accept_encoding] == "identity");
}

TEST_CASE("upstream request headers: every Connection field names fields to drop", "[headers]") {
  // RFC 9110 7.6.1: Connection is a list, and a client may send it as
  // several fields. The fuzz target client_request_fuzz found the second
  // field's names forwarded.
  Fields in;
  in.set(http::field::host, "edge.example.com");
  in.insert(http::field::connection, "keep-alive");
  in.insert(http::field::connection, "X-Hop-A");
  in.insert("Connection", "x-hop-b, close");
  in.set("X-Hop-A", "1");
  in.set("x-hop-b", "2");
  in.set("X-Kept", "3");
  PooledString text;
  HeaderText sink(text);
  PrepareUpstreamHeaders(in, sink, ForwardInfo{"127.0.0.1", false, "rid"});
  FieldList sent = ParseHead<true>("GET / HTTP/1.1\r\n" + std::string(text) + "\r\n");
  auto has = [&](std::string_view name) {
    return std::any_of(sent.begin(), sent.end(),
                       [&](const auto& f) { return boost::beast::iequals(f.first, name); });
  };
  CHECK_FALSE(has("X-Hop-A"));
  CHECK_FALSE(has("x-hop-b"));
  CHECK_FALSE(has("Connection"));
  CHECK(has("X-Kept"));
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
}

TEST_CASE("request ids: generated ones are unique hex, client ones validated", "[headers]") {
  GeneratedRequestId ia = NewRequestId(), ib = NewRequestId();
  std::string a(ia.begin(), ia.end()), b(ib.begin(), ib.end());
  CHECK(a.size() == 32);
  CHECK(a != b);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  // Every digit comes up, and every position varies: all 128 bits are used.
  std::set<char> digits;
  std::vector<std::set<char>> at(32);
  for (int n = 0; n < 256; ++n) {
    GeneratedRequestId id = NewRequestId();
    for (size_t i = 0; i < id.size(); ++i) {
      digits.insert(id[i]);
      at[i].insert(id[i]);
    }
  }
  CHECK(digits.size() == 16);
  for (const std::set<char>& seen : at)
    CHECK(seen.size() > 1);
  CHECK(IsAcceptableRequestId("abc-123_DEF"));
  CHECK_FALSE(IsAcceptableRequestId(""));
  CHECK_FALSE(IsAcceptableRequestId("has space"));
  CHECK_FALSE(IsAcceptableRequestId(std::string(200, 'a')));
  CHECK_FALSE(IsAcceptableRequestId("quote\""));
}
