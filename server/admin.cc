#include "server/admin.h"

#include <optional>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value_from.hpp>

#include "absl/strings/str_cat.h"
#include "common/await.h"
#include "common/json.h"
#include "proxy/openai_error.h"
#include "server/server.h"

namespace geogate::server {

namespace beast = boost::beast;
namespace http = beast::http;
using net::ip::tcp;

namespace {

constexpr auto kAdminTimeout = std::chrono::seconds(30);

constexpr size_t kAdminHeaderLimit = 16 * 1024;
constexpr size_t kAdminBodyLimit = 64 * 1024;
constexpr auto kLingerTimeout = std::chrono::seconds(1);
constexpr size_t kLingerMaxBytes = 1 << 20;

// The error the data plane (proxy/session.cc) answers for a request that
// could not be read, or nullopt when there is nobody to answer (the client
// closed, or the read timed out and the stream closed the socket).
std::optional<std::pair<proxy::ErrorKind, std::string>> ReadRefusal(
    const boost::system::error_code& ec) {
  if (ec == http::error::header_limit)
    return std::pair{proxy::ErrorKind::kHeadersTooLarge,
                     std::string("request headers exceed the admin port's 16 KiB limit")};
  if (ec == http::error::body_limit)
    return std::pair{proxy::ErrorKind::kBodyTooLarge,
                     std::string("request body exceeds the admin port's 64 KiB limit")};
  if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message)
    return std::pair{proxy::ErrorKind::kBadRequest, "malformed request: " + ec.message()};
  return std::nullopt;
}

// Answers a request that cannot be served (framing, limits) with the data
// plane's error, then closes the connection.
net::awaitable<void> Refuse(beast::tcp_stream& stream, proxy::ErrorKind kind, std::string message) {
  http::response<http::string_body> res{static_cast<http::status>(proxy::SpecOf(kind).status), 11};
  res.set(http::field::server, "geogate-admin");
  res.set(http::field::content_type, "application/json");
  res.body() = proxy::ErrorBody(kind, message);
  res.keep_alive(false);
  res.prepare_payload();
  stream.expires_after(kAdminTimeout);
  auto [wec, wn] = co_await http::async_write(stream, res, common::kAwait);
  if (wec) co_return;
  // Stop sending, and drain what the client still sends for a moment, so
  // its TCP stack does not answer our close with a reset that discards the
  // response before it is read (as the data plane's lingering close).
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream.expires_after(kLingerTimeout);
  char sink[4096];
  for (size_t total = 0; total < kLingerMaxBytes;) {
    auto [rec, rn] = co_await stream.async_read_some(net::buffer(sink), common::kAwait);
    if (rec) break;
    total += rn;
  }
}

}  // namespace

absl::Status AdminServer::Start(const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  auto addr = net::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("bad admin address ", host));
  tcp::endpoint ep(addr, port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(128, ec);
  if (ec)
    return absl::UnavailableError(
        absl::StrCat("cannot listen on admin address ", host, ":", port, ": ", ec.message()));
  port_ = acceptor_.local_endpoint().port();
  net::co_spawn(ioc_, AcceptLoop(), net::detached);
  return absl::OkStatus();
}

void AdminServer::Stop() {
  boost::system::error_code ec;
  acceptor_.close(ec);
}

net::awaitable<void> AdminServer::AcceptLoop() {
  while (acceptor_.is_open()) {
    auto [ec, socket] = co_await acceptor_.async_accept(common::kAwait);
    if (ec) {
      if (!acceptor_.is_open()) break;
      continue;
    }
    net::co_spawn(ioc_, Serve(std::move(socket)), net::detached);
  }
}

net::awaitable<void> AdminServer::Serve(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kAdminHeaderLimit);
    parser.body_limit(kAdminBodyLimit);
    stream.expires_after(kAdminTimeout);
    // Head, then body, as the data plane reads them: the framing is checked
    // before any body byte is taken, and a request that cannot be read gets
    // the data plane's error instead of a silent close.
    auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, common::kAwait);
    if (!ec && parser.get().count(http::field::transfer_encoding) != 0 && !parser.chunked()) {
      // RFC 9112 6.1: no determinable length, a smuggling shape.
      co_await Refuse(stream, proxy::ErrorKind::kBadRequest,
                      "Transfer-Encoding other than chunked is not accepted");
      co_return;
    }
    if (!ec && !parser.is_done()) {
      auto [bec, bn] = co_await http::async_read(stream, buffer, parser, common::kAwait);
      ec = bec;
    }
    if (ec) {
      if (auto refusal = ReadRefusal(ec)) co_await Refuse(stream, refusal->first, refusal->second);
      co_return;
    }
    http::request<http::string_body> req = parser.release();
    std::string_view target = req.target();
    std::string_view path = target.substr(0, target.find('?'));
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "geogate-admin");
    res.set(http::field::cache_control, "no-store");
    auto json = [&](http::status st, std::string body) {
      res.result(st);
      res.set(http::field::content_type, "application/json");
      res.body() = std::move(body);
    };
    // HEAD is answered wherever GET is: the same head, no body.
    bool head = req.method() == http::verb::head;
    bool get = req.method() == http::verb::get || head;
    bool post = req.method() == http::verb::post;
    if (path == "/healthz" && get) {
      res.set(http::field::content_type, "text/plain");
      res.body() = "ok\n";
    } else if (path == "/readyz" && get) {
      res.set(http::field::content_type, "text/plain");
      if (server_.Ready()) {
        res.body() = "ready\n";
      } else {
        res.result(http::status::service_unavailable);
        res.body() =
            server_.draining() ? "not ready: draining\n" : "not ready: no healthy backend yet\n";
      }
    } else if (path == "/metrics" && get) {
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = co_await server_.MetricsText();
    } else if (path == "/admin/backends" && get) {
      json(http::status::ok, server_.BackendsJson());
    } else if (path == "/admin/config" && get) {
      json(http::status::ok, server_.ConfigJson());
    } else if (path == "/admin/geo" && get) {
      json(http::status::ok, server_.GeoJson());
    } else if (path == "/admin/showback" && get) {
      // An owned copy: the query outlives suspension points inside ShowbackQuery.
      std::string query;
      if (size_t q = target.find('?'); q != std::string_view::npos)
        query.assign(target.substr(q + 1));
      std::tuple<unsigned, std::string, std::string> reply =
          co_await server_.ShowbackQuery(std::move(query));
      res.result(static_cast<http::status>(std::get<0>(reply)));
      res.set(http::field::content_type, std::get<1>(reply));
      res.body() = std::move(std::get<2>(reply));
    } else if (path == "/admin/capacity" && get) {
      json(http::status::ok, server_.CapacityJson());
    } else if (path == "/admin/reload" && post) {
      ReloadOutcome r = server_.Reload("POST /admin/reload");
      json(r.ok ? http::status::ok : http::status::unprocessable_entity,
           common::SerializeJson(boost::json::object{
               {"ok", r.ok},
               {"generation", r.generation},
               {"backends", boost::json::array{r.backend_changes}},
               {"errors", boost::json::value_from(r.errors)},
               {"warnings", boost::json::value_from(r.warnings)},
           }));
    } else if (path == "/admin/drain" && post) {
      server_.BeginDrain("POST /admin/drain");
      json(http::status::accepted, common::SerializeJson(boost::json::object{{"draining", true}}));
    } else {
      json(http::status::not_found,
           proxy::ErrorBody(proxy::ErrorKind::kNotFound,
                            absl::StrCat("no admin endpoint ", std::string(req.method_string()),
                                         " ", std::string(path))));
    }
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    if (head) res.body().clear();  // Content-Length stays the body's
    auto [wec, wn] = co_await http::async_write(stream, res, common::kAwait);
    if (wec || !req.keep_alive()) break;
  }
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

}  // namespace geogate::server
