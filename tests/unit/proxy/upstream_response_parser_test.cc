#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>

#include "proxy/headers.h"
#include "proxy/response_head.h"
#include "proxy/upstream_response_parser.h"

using namespace geogate::proxy;

namespace {

namespace net = boost::asio;
using FieldList = std::vector<std::pair<std::string, std::string>>;

// The fields a head's text holds, parsed back by Beast's own parser: what
// the client sees.
FieldList FieldsOfHead(std::string_view head) {
  http::response_parser<http::empty_body> p;
  p.skip(true);
  boost::system::error_code ec;
  p.put(net::buffer(head.data(), head.size()), ec);
  REQUIRE_FALSE(ec);
  REQUIRE(p.is_header_done());
  FieldList out;
  for (const auto& f : p.get())
    out.emplace_back(f.name_string(), f.value());
  return out;
}

// Feeds `wire` in pieces of `step` bytes, as reads land; the body goes
// into `body` through a buffer of `room` bytes at a time.
void Feed(UpstreamResponseParser& p, std::string_view wire, size_t step, std::string& body,
          boost::system::error_code& ec, size_t room = 4096) {
  std::string pending;
  std::vector<char> buf(room);
  size_t at = 0;
  for (;;) {
    bool fed = at < wire.size();
    if (fed) {
      size_t n = std::min(step, wire.size() - at);
      pending.append(wire.substr(at, n));
      at += n;
    }
    while (!p.is_done() && !pending.empty()) {
      p.set_body_buffer(buf.data(), buf.size());
      size_t used = p.put(net::buffer(pending), ec);
      pending.erase(0, used);
      body.append(buf.data(), buf.size() - p.body_room());
      if (ec == http::error::need_buffer) {  // the buffer is full: take it, go on
        ec = {};
        continue;
      }
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec || used == 0) return;
    }
    if (p.is_done() || !fed) return;
  }
}

constexpr std::string_view kHostileHead =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/event-stream\r\n"
    "X-Early: named by the Connection field below\r\n"
    "Transfer-Encoding: chunked\r\n"
    "Connection: close, X-Early, x-late\r\n"
    "Keep-Alive: timeout=5\r\n"
    "Proxy-Connection: keep-alive\r\n"
    "TE: trailers\r\n"
    "Trailer: X-Checksum\r\n"
    "Upgrade: h2c\r\n"
    "Proxy-Authenticate: Basic\r\n"
    "Proxy-Authorization: Basic abc\r\n"
    "x-geogate-backend: spoofed\r\n"
    "X-Geogate-Region: spoofed\r\n"
    "X-Request-Id: backend-id\r\n"
    "Access-Control-Allow-Origin: *\r\n"
    "access-control-allow-credentials: true\r\n"
    "Access-Control-Expose-Headers: x-secret\r\n"
    "access-control-: kept: no field name after the prefix\r\n"
    "x-late: named too\r\n"
    "X-Gpusim-Backend: b1\r\n"
    "Cache-Control: no-cache\r\n"
    "\r\n";

}  // namespace

TEST_CASE("upstream response: only the end-to-end fields reach the client, in order",
          "[upstream_response]") {
  for (size_t step : {size_t{1}, size_t{7}, kHostileHead.size()}) {
    CAPTURE(step);
    UpstreamResponseParser p;
    std::string body;
    boost::system::error_code ec;
    Feed(p, kHostileHead, step, body, ec);
    REQUIRE_FALSE(ec);
    REQUIRE(p.is_header_done());
    CHECK(p.status() == 200);
    CHECK(p.reason() == "OK");
    CHECK(p.event_stream());
    CHECK_FALSE(p.keep_alive());
    CHECK(p.forwarded_fields() ==
          "Content-Type: text/event-stream\r\n"
          "access-control-: kept: no field name after the prefix\r\n"
          "X-Gpusim-Backend: b1\r\n"
          "Cache-Control: no-cache\r\n");
    p.ReleaseFields();
    CHECK(p.forwarded_fields().empty());
  }
}

TEST_CASE("upstream response: the client's head has the backend's fields and the tags once",
          "[upstream_response][headers]") {
  UpstreamResponseParser p;
  std::string body;
  boost::system::error_code ec;
  Feed(p, kHostileHead, kHostileHead.size(), body, ec);
  REQUIRE_FALSE(ec);
  ResponseHead head(p.status(), p.reason(), 11);
  head.AppendFields(p.forwarded_fields());
  AddResponseTags(head, ResponseTags{"fra1", "eu-west", "eu-1", "rid", "eu"});
  head.SetFraming(std::nullopt, /*chunked=*/true, /*keep_alive=*/true);
  FieldList want = {{"Content-Type", "text/event-stream"},
                    {"access-control-", "kept: no field name after the prefix"},
                    {"X-Gpusim-Backend", "b1"},
                    {"Cache-Control", "no-cache"},
                    {"x-geogate-edge", "fra1"},
                    {"x-geogate-region", "eu-west"},
                    {"x-geogate-backend", "eu-1"},
                    {"x-geogate-residency-rule", "eu"},
                    {"x-request-id", "rid"},
                    {"Transfer-Encoding", "chunked"}};
  CHECK(FieldsOfHead(head.text()) == want);

  ResponseHead no_rule(200, "OK", 11);
  AddResponseTags(no_rule, ResponseTags{"fra1", "r", "b", "rid", ""});
  no_rule.SetFraming(0, false, true);
  for (const auto& [name, value] : FieldsOfHead(no_rule.text()))
    CHECK(name != "x-geogate-residency-rule");
}

TEST_CASE("upstream response: the forwarding rule agrees with IsHopByHop on every name",
          "[upstream_response][headers]") {
  for (std::string_view name :
       {"Connection", "keep-alive", "Proxy-Connection", "te", "Trailer", "TRANSFER-ENCODING",
        "upgrade", "Proxy-Authenticate", "proxy-authorization"}) {
    CAPTURE(name);
    CHECK(IsHopByHop(name, ""));
    CHECK_FALSE(ForwardsResponseField(http::string_to_field(name), name));
    // Judged by Beast's code for the name: Beast must know every one.
    CHECK(http::string_to_field(name) != http::field::unknown);
  }
  CHECK_FALSE(ForwardsResponseField(http::field::content_length, "Content-Length"));
  CHECK_FALSE(ForwardsResponseField(http::field::unknown, "X-GEOGATE-EDGE"));
  CHECK_FALSE(ForwardsResponseField(http::field::unknown, "x-request-id"));
  CHECK_FALSE(ForwardsResponseField(http::field::access_control_allow_origin,
                                    "Access-Control-Allow-Origin"));
  CHECK(ForwardsResponseField(http::field::content_type, "Content-Type"));
  CHECK(ForwardsResponseField(http::field::retry_after, "Retry-After"));
  CHECK(ForwardsResponseField(http::field::unknown, "openai-processing-ms"));
  CHECK(ForwardsResponseField(http::field::unknown, "x-request-ids"));
}

TEST_CASE("upstream response: the first Content-Type decides an event stream",
          "[upstream_response]") {
  auto sse = [](std::string_view fields) {
    UpstreamResponseParser p;
    std::string wire = "HTTP/1.1 200 OK\r\n" + std::string(fields) + "Content-Length: 0\r\n\r\n";
    std::string body;
    boost::system::error_code ec;
    Feed(p, wire, wire.size(), body, ec);
    REQUIRE_FALSE(ec);
    REQUIRE(p.is_done());
    return p.event_stream();
  };
  CHECK(sse("Content-Type: text/event-stream; charset=utf-8\r\n"));
  CHECK_FALSE(sse("Content-Type: application/json\r\n"));
  CHECK_FALSE(sse(""));
  CHECK_FALSE(sse("Content-Type: application/json\r\nContent-Type: text/event-stream\r\n"));
  CHECK(sse("content-type: text/event-stream\r\nContent-Type: application/json\r\n"));
}

TEST_CASE("upstream response: the body arrives de-chunked, a buffer at a time",
          "[upstream_response]") {
  const std::string chunked =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: t\r\n\r\n";
  const std::string sized = "HTTP/1.0 201 Created\r\nContent-Length: 12\r\n\r\nhello world!";
  for (size_t step : {size_t{1}, size_t{5}, size_t{1000}}) {
    for (size_t room : {size_t{1}, size_t{4}, size_t{64}}) {
      CAPTURE(step, room);
      UpstreamResponseParser a;
      std::string body;
      boost::system::error_code ec;
      Feed(a, chunked, step, body, ec, room);
      REQUIRE_FALSE(ec);
      CHECK(a.is_done());
      CHECK(a.keep_alive());
      CHECK(body == "hello world!");
      CHECK(a.forwarded_fields().empty());

      UpstreamResponseParser b;
      body.clear();
      Feed(b, sized, step, body, ec, room);
      REQUIRE_FALSE(ec);
      CHECK(b.is_done());
      CHECK(b.status() == 201);
      CHECK(b.reason() == "Created");
      CHECK_FALSE(b.keep_alive());
      CHECK(b.content_length().value_or(0) == 12);
      CHECK(body == "hello world!");
    }
  }
}

TEST_CASE("upstream response: no body buffer, no body bytes taken", "[upstream_response]") {
  const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
  UpstreamResponseParser p;
  p.eager(true);
  boost::system::error_code ec;
  size_t used = p.put(net::buffer(wire), ec);
  CHECK(ec == http::error::need_buffer);
  CHECK(used == wire.size() - 3);
  CHECK(p.is_header_done());
  CHECK_FALSE(p.is_done());
}

TEST_CASE("upstream response: malformed and oversized heads are errors", "[upstream_response]") {
  auto error_of = [](const std::string& wire) {
    UpstreamResponseParser p;
    std::string body;
    boost::system::error_code ec;
    Feed(p, wire, wire.size(), body, ec);
    return ec;
  };
  CHECK(error_of("HTTP/1.1 OK\r\n\r\n"));
  CHECK(error_of("HTTP/1.1 200 OK\r\nBad Field: x\r\n\r\n"));
  CHECK(error_of("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"));
  CHECK(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"));
  std::string huge = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; huge.size() < 70 * 1024; ++i)
    huge += "X-Filler-" + std::to_string(i) + ": " + std::string(100, 'a') + "\r\n";
  huge += "\r\n";
  CHECK(error_of(huge) == http::error::header_limit);
}
