#include "tracing/otlp_exporter.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "common/log.h"

namespace geogate::tracing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {
constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);
}  // namespace

struct OtlpExporter::State {
  State(net::io_context& c, std::shared_ptr<SpanBatcher> b)
      : ioc(c), batcher(std::move(b)), timer(c) {}
  net::io_context& ioc;
  std::shared_ptr<SpanBatcher> batcher;
  net::steady_timer timer;
  ExportOptions options;
  bool started = false;
  bool stopped = false;
  bool failing = false;  // the last export failed: log again only once it recovers
  std::shared_ptr<beast::tcp_stream> in_flight;
};

OtlpExporter::OtlpExporter(net::io_context& ioc, std::shared_ptr<SpanBatcher> batcher)
    : state_(std::make_shared<State>(ioc, std::move(batcher))) {}

OtlpExporter::~OtlpExporter() {
  Stop();
}

void OtlpExporter::Configure(ExportOptions options) {
  state_->options = std::move(options);
}

void OtlpExporter::Start() {
  if (state_->started) return;
  state_->started = true;
  net::co_spawn(state_->ioc, Loop(state_), net::detached);
}

void OtlpExporter::Stop() {
  state_->stopped = true;
  state_->timer.cancel();
  if (state_->in_flight) state_->in_flight->cancel();
}

net::awaitable<void> OtlpExporter::Loop(std::shared_ptr<State> st) {
  while (!st->stopped) {
    std::vector<Span> batch = st->batcher->TakeReady(SpanBatcher::Clock::now());
    if (batch.empty()) {
      st->timer.expires_after(st->options.poll);
      co_await st->timer.async_wait(kUseTuple);
      continue;
    }
    size_t n = batch.size();
    std::string body = EncodeExportRequest(st->options.resource, batch);
    batch.clear();
    if (co_await Post(st, std::move(body))) {
      st->batcher->CountExported(n);
    } else {
      st->batcher->CountExportFailed(n);
    }
  }
}

// One POST under one deadline (resolve, connect, write, read). @return
// whether the collector answered 2xx.
net::awaitable<bool> OtlpExporter::Post(std::shared_ptr<State> st, std::string body) {
  const ExportOptions& o = st->options;
  auto stream = std::make_shared<beast::tcp_stream>(st->ioc);
  st->in_flight = stream;
  auto done = [&](bool ok, std::string_view why) {
    st->in_flight.reset();
    if (!ok && !st->failing)
      gateway::LogWarn("tracing",
                       std::string("span export to ") + o.host + ":" + std::to_string(o.port) +
                           o.path +
                           " failed, dropping batches until it recovers: " + std::string(why));
    if (ok && st->failing) gateway::LogInfo("tracing", "span export recovered");
    st->failing = !ok;
    return ok;
  };
  stream->expires_after(o.timeout);
  tcp::resolver resolver(st->ioc);
  auto [rec, endpoints] =
      co_await resolver.async_resolve(o.host, std::to_string(o.port), kUseTuple);
  if (rec) co_return done(false, rec.message());
  auto [cec, ep] = co_await stream->async_connect(endpoints, kUseTuple);
  if (cec) co_return done(false, cec.message());
  http::request<http::string_body> req{http::verb::post, o.path, 11};
  std::string host_field = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  req.set(http::field::host, host_field + ":" + std::to_string(o.port));
  req.set(http::field::content_type, "application/json");
  req.set(http::field::user_agent, "geogate-otlp");
  req.body() = std::move(body);
  req.prepare_payload();
  req.keep_alive(false);
  auto [wec, wn] = co_await http::async_write(*stream, req, kUseTuple);
  if (wec) co_return done(false, wec.message());
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024);  // a collector's answer is small; more is not read
  auto [rdec, rn] = co_await http::async_read(*stream, buf, parser, kUseTuple);
  if (rdec) co_return done(false, rdec.message());
  unsigned status = parser.get().result_int();
  if (status < 200 || status >= 300)
    co_return done(false, "collector answered " + std::to_string(status));
  boost::system::error_code ignored;
  stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
  co_return done(true, "");
}

}  // namespace geogate::tracing
