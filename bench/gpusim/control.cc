#include "bench/gpusim/control.h"

#include <cmath>
#include <cstdio>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "bench/gpusim/sim_server.h"

namespace gpusim {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);

struct Reply {
  http::status status = http::status::ok;
  json::value body;
};

Reply bad(std::string message) {
  return {http::status::bad_request,
          json::object{{"error", json::object{{"message", std::move(message)},
                                              {"type", "invalid_request_error"},
                                              {"code", "bad_request"}}}}};
}

json::object tunables_json(const Tunables& t) {
  return json::object{{"mode", mode_name(t.mode)}, {"n", t.die_after_n},
                      {"factor", t.slow_factor},   {"rtt_ms", t.rtt_ms},
                      {"ttft_ms", t.ttft_ms},      {"token_interval_ms", t.token_interval_ms}};
}

// Reads a non-negative number field; false (and `error`) when present but bad.
bool read_number(const json::object& o, const char* key, std::optional<double>& out,
                 std::string& error) {
  const json::value* v = o.if_contains(key);
  if (!v) return true;
  error_code ec;
  const double d = v->to_number<double>(ec);
  if (ec || !std::isfinite(d) || d < 0) {
    error = std::string("'") + key + "' must be a non-negative number";
    return false;
  }
  out = d;
  return true;
}

std::optional<TunablesUpdate> parse_update(std::string_view body, std::string& error) {
  error_code ec;
  json::value doc = json::parse(body, ec);
  if (ec || !doc.is_object()) {
    error = "body must be a JSON object";
    return std::nullopt;
  }
  const json::object& o = doc.get_object();
  for (const auto& kv : o) {
    const std::string_view k = kv.key();
    if (k != "mode" && k != "n" && k != "factor" && k != "rtt_ms" && k != "ttft_ms" &&
        k != "token_interval_ms") {
      error = "unknown field '" + std::string(k) + "'";
      return std::nullopt;
    }
  }
  TunablesUpdate u;
  if (const json::value* m = o.if_contains("mode")) {
    if (m->is_string()) u.mode = parse_mode(m->get_string());
    if (!u.mode) {
      error = "'mode' must be one of healthy, refuse, error500, stall, die_after, slow";
      return std::nullopt;
    }
  }
  std::optional<double> n;
  if (!read_number(o, "n", n, error) || !read_number(o, "factor", u.factor, error) ||
      !read_number(o, "rtt_ms", u.rtt_ms, error) || !read_number(o, "ttft_ms", u.ttft_ms, error) ||
      !read_number(o, "token_interval_ms", u.token_interval_ms, error)) {
    return std::nullopt;
  }
  if (n) {
    if (*n != std::floor(*n)) {
      error = "'n' must be an integer";
      return std::nullopt;
    }
    u.n = static_cast<int64_t>(*n);
  }
  if (u.factor && *u.factor <= 0) {
    error = "'factor' must be positive";
    return std::nullopt;
  }
  return u;
}

}  // namespace

struct ControlServer::Impl {
  Impl(asio::io_context& io, SimServer& sim) : io(io), sim(sim), acceptor(io) {}

  Reply handle(const http::request<http::string_body>& req) {
    const std::string_view target = req.target();
    const std::string_view path = target.substr(0, target.find('?'));
    const bool get = req.method() == http::verb::get;
    const bool post = req.method() == http::verb::post;
    SimContext& ctx = sim.context();
    if (path == "/control" && post) {
      std::string error;
      auto update = parse_update(req.body(), error);
      if (!update) return bad(error);
      return {http::status::ok, tunables_json(sim.apply(*update))};
    }
    if (path == "/control" && get)
      return {http::status::ok, tunables_json(ctx.tunables.snapshot())};
    if (path == "/control/stats" && get) {
      json::object stats{{"name", ctx.options.name},
                         {"region", ctx.options.region},
                         {"mode", mode_name(ctx.tunables.mode())},
                         {"inflight", ctx.limiter.running()},
                         {"queue_depth", ctx.limiter.waiting()}};
      for (auto& kv : ctx.stats.snapshot())
        stats[kv.key()] = kv.value();
      return {http::status::ok, std::move(stats)};
    }
    if (path == "/control/requests" && get)
      return {http::status::ok, json::object{{"recording", ctx.options.record_requests},
                                             {"requests", ctx.recent.snapshot()}}};
    if (path == "/control/reset" && post) {
      ctx.stats.reset();
      ctx.recent.clear();
      return {http::status::ok, json::object{{"status", "ok"}}};
    }
    return {http::status::not_found,
            json::object{{"error", json::object{{"message", "no such control endpoint"},
                                                {"type", "invalid_request_error"},
                                                {"code", "not_found"}}}}};
  }

  asio::awaitable<void> session(beast::tcp_stream stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(16 * 1024);
      parser.body_limit(64 * 1024);
      stream.expires_after(std::chrono::seconds(60));
      auto [ec, n] = co_await http::async_read(stream, buffer, parser, kNoThrow);
      if (ec) break;
      const auto& req = parser.get();
      Reply reply = handle(req);
      http::response<http::string_body> res{reply.status, req.version()};
      res.set(http::field::content_type, "application/json");
      res.keep_alive(req.keep_alive());
      res.body() = json::serialize(reply.body);
      res.prepare_payload();
      auto [wec, wn] = co_await http::async_write(stream, res, kNoThrow);
      if (wec || !req.keep_alive()) break;
    }
    error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(kNoThrow);
      if (ec) {
        if (!acceptor.is_open()) co_return;
        continue;
      }
      asio::co_spawn(io, session(beast::tcp_stream(std::move(socket))), asio::detached);
    }
  }

  asio::io_context& io;
  SimServer& sim;
  tcp::acceptor acceptor;
};

ControlServer::ControlServer(asio::io_context& io, SimServer& sim)
    : impl_(std::make_unique<Impl>(io, sim)) {}

ControlServer::~ControlServer() = default;

bool ControlServer::bind(const HostPort& where, std::string& error) {
  error_code ec;
  auto address = asio::ip::make_address(where.host == "localhost" ? "127.0.0.1" : where.host, ec);
  if (ec) {
    error = "control: bad address " + where.host + " (give an IP address)";
    return false;
  }
  const tcp::endpoint endpoint(address, where.port);
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error = "control: cannot listen on " + where.host + ":" + std::to_string(where.port) + ": " +
            ec.message();
    return false;
  }
  return true;
}

std::string ControlServer::bound_address() const {
  error_code ec;
  const tcp::endpoint ep = impl_->acceptor.local_endpoint(ec);
  const std::string host = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(ep.port());
}

void ControlServer::start() {
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
}

}  // namespace gpusim
