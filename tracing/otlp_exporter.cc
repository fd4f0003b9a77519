#include "tracing/otlp_exporter.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <optional>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "common/await.h"
#include "common/bounded_resolver.h"
#include "common/log.h"

namespace geogate::tracing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

namespace {
constexpr size_t kResponseLimit = 64 * 1024;  // a collector's answer is small; more is not read

using Request = http::request<http::string_body>;
using ResponseParser = http::response_parser<http::string_body>;

// One request and its response on an open connection.
template <class Stream>
net::awaitable<error_code> Exchange(Stream& s, beast::flat_buffer& buffer, Request& req,
                                    ResponseParser& parser) {
  auto [wec, wn] = co_await http::async_write(s, req, common::kAwait);
  if (wec) co_return wec;
  auto [rec, rn] = co_await http::async_read(s, buffer, parser, common::kAwait);
  co_return rec;
}

// A kept connection the collector closed while it was idle fails like this
// before any byte of the answer: worth one more try on a new connection.
bool ClosedWhileIdle(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == net::error::not_connected || ec == net::ssl::error::stream_truncated;
}

std::string HostField(const ExportOptions& o) {
  std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  return host + ":" + std::to_string(o.port);
}
}  // namespace

struct OtlpExporter::Conn {
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
  // What it was opened for: a reload that changes any of these reconnects.
  std::string host;
  uint16_t port = 0;
  const net::ssl::context* tls_context = nullptr;

  beast::tcp_stream& tcp() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  bool Serves(const ExportOptions& o) const {
    return host == o.host && port == o.port && tls_context == o.tls.get();
  }
};

struct OtlpExporter::State {
  State(net::io_context& c, std::shared_ptr<SpanBatcher> b)
      : ioc(c), batcher(std::move(b)), timer(c), flush_timer(c), resolver(c.get_executor()) {}
  net::io_context& ioc;
  std::shared_ptr<SpanBatcher> batcher;
  net::steady_timer timer;
  net::steady_timer flush_timer;
  common::BoundedResolver resolver;
  ExportOptions options;
  bool started = false;
  bool stopped = false;
  bool failing = false;  // the last export failed: log again only once it recovers
  std::unique_ptr<Conn> conn;
  size_t in_flight_spans = 0;  // of the batch being posted
  uint64_t connections = 0;
  // Flush(): the deadline, whom to tell, and the counters when it began.
  bool flushing = false;
  Clock::time_point flush_deadline{};
  std::function<void(const FlushOutcome&)> flush_done;
  uint64_t exported_at_flush = 0;
  uint64_t failed_at_flush = 0;

  // Ends what is in flight: pending operations complete with an error.
  void Abort() {
    resolver.Cancel();
    if (conn) {
      error_code ignored;
      conn->tcp().socket().close(ignored);
    }
  }
  size_t DropQueued() {
    size_t n = 0;
    for (std::vector<Span> rest = batcher->TakeAny(); !rest.empty(); rest = batcher->TakeAny())
      n += rest.size();
    return n;
  }
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
  State& st = *state_;
  st.flush_done = nullptr;
  st.stopped = true;
  st.timer.cancel();
  st.flush_timer.cancel();
  st.Abort();
  // The io_context may go away next: a lookup still running must not
  // touch it.
  st.resolver.Abandon();
}

uint64_t OtlpExporter::connections_opened() const {
  return state_->connections;
}

void OtlpExporter::Flush(std::chrono::milliseconds bound,
                         std::function<void(const FlushOutcome&)> done) {
  State& st = *state_;
  if (st.flushing) return;
  st.flushing = true;
  st.flush_done = std::move(done);
  st.exported_at_flush = st.batcher->exported();
  st.failed_at_flush = st.batcher->dropped_export_failed();
  if (!st.started || st.stopped || bound <= std::chrono::milliseconds(0)) {
    EndFlush(st, /*timed_out=*/false);
    return;
  }
  st.flush_deadline = Clock::now() + bound;
  st.flush_timer.expires_after(bound);
  st.flush_timer.async_wait([s = state_](error_code ec) {
    if (!ec) EndFlush(*s, /*timed_out=*/true);
  });
  st.timer.cancel();  // the loop takes the next batch now, due or not
}

// The flush is over (queue empty, or the bound reached): stop, drop what is
// left and tell the caller, from a fresh handler.
void OtlpExporter::EndFlush(State& st, bool timed_out) {
  if (!st.flush_done) return;
  auto done = std::move(st.flush_done);
  st.flush_done = nullptr;
  st.stopped = true;
  st.timer.cancel();
  st.flush_timer.cancel();
  FlushOutcome out;
  out.timed_out = timed_out;
  if (timed_out) {
    st.Abort();
    out.dropped += st.in_flight_spans;
  }
  out.dropped += st.DropQueued();
  out.sent = st.batcher->exported() - st.exported_at_flush;
  out.dropped += st.batcher->dropped_export_failed() - st.failed_at_flush;
  net::post(st.ioc, [done = std::move(done), out] { done(out); });
}

net::awaitable<void> OtlpExporter::Loop(std::shared_ptr<State> st) {
  while (!st->stopped) {
    std::vector<Span> batch =
        st->flushing ? st->batcher->TakeAny() : st->batcher->TakeReady(Clock::now());
    if (batch.empty()) {
      if (st->flushing) {
        EndFlush(*st, /*timed_out=*/false);
        break;
      }
      st->timer.expires_after(st->options.poll);
      co_await st->timer.async_wait(common::kAwait);
      continue;
    }
    size_t n = batch.size();
    std::string body = EncodeExportRequest(st->options.resource, batch);
    batch.clear();
    st->in_flight_spans = n;
    bool ok = co_await Post(st, std::move(body));
    st->in_flight_spans = 0;
    if (ok) {
      st->batcher->CountExported(n);
    } else {
      st->batcher->CountExportFailed(n);
    }
  }
  // Closes the kept connection once the loop ends.
  st->conn.reset();
}

// A new connection to the collector, within `end`. @return "" when
// st->conn is open (and TLS established), else why not.
net::awaitable<std::string> OtlpExporter::Connect(std::shared_ptr<State> st, const ExportOptions& o,
                                                  Clock::time_point end) {
  common::BoundedResolver::Endpoints endpoints;
  error_code addr_ec;
  auto addr = net::ip::make_address(o.host, addr_ec);
  if (!addr_ec) {
    endpoints.emplace_back(addr, o.port);
  } else {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left <= std::chrono::milliseconds(0)) co_return "no time left to resolve " + o.host;
    auto [rec, found] = co_await st->resolver.Resolve(o.host, o.port, left);
    if (rec == net::error::timed_out)
      co_return "cannot resolve " + o.host + ": no answer in time (connect_timeout_ms)";
    if (rec == net::error::try_again)
      co_return "cannot resolve " + o.host + ": an earlier lookup is still unanswered";
    if (rec) co_return "cannot resolve " + o.host + ": " + rec.message();
    endpoints = std::move(found);
  }
  if (st->stopped) co_return "stopped";
  auto conn = std::make_unique<Conn>();
  conn->host = o.host;
  conn->port = o.port;
  conn->tls_context = o.tls.get();
  if (o.tls)
    conn->tls.emplace(beast::tcp_stream(st->ioc), *o.tls);
  else
    conn->plain.emplace(st->ioc);
  conn->tcp().expires_at(end);
  st->conn = std::move(conn);  // from here Abort() can end the connect
  Conn& c = *st->conn;
  auto [cec, ep] = co_await c.tcp().async_connect(endpoints, common::kAwaitInFrame);
  if (cec) {
    st->conn.reset();
    co_return "connect to " + HostField(o) + ": " + cec.message();
  }
  error_code ignored;
  c.tcp().socket().set_option(tcp::no_delay(true), ignored);
  if (c.tls) {
    if (addr_ec)  // SNI only for names, never for IP literals (RFC 6066 §3)
      SSL_set_tlsext_host_name(c.tls->native_handle(), o.host.c_str());
    c.tls->set_verify_callback(net::ssl::host_name_verification(o.host));
    auto [hec] =
        co_await c.tls->async_handshake(net::ssl::stream_base::client, common::kAwaitInFrame);
    if (hec) {
      st->conn.reset();
      co_return "TLS handshake with " + HostField(o) + ": " + hec.message();
    }
  }
  st->connections++;
  co_return "";
}

// One POST, on the kept connection or a new one, under one deadline
// (export timeout, or the flush's bound when sooner). @return whether the
// collector answered 2xx.
net::awaitable<bool> OtlpExporter::Post(std::shared_ptr<State> st, std::string body) {
  const ExportOptions o = st->options;  // a reload may replace them while this waits
  Clock::time_point end = Clock::now() + o.timeout;
  if (st->flushing) end = std::min(end, st->flush_deadline);
  auto done = [&](bool ok, std::string_view why) {
    if (!ok && !st->failing && !st->stopped)
      common::LogWarn("tracing",
                      std::string("span export to ") + (o.tls ? "https://" : "http://") +
                          HostField(o) + o.path +
                          " failed, dropping batches until it recovers: " + std::string(why));
    if (ok && st->failing) common::LogInfo("tracing", "span export recovered");
    if (!st->stopped) st->failing = !ok;
    return ok;
  };

  Request req{http::verb::post, o.path, 11};
  req.set(http::field::host, HostField(o));
  req.set(http::field::content_type, "application/json");
  req.set(http::field::user_agent, "geogate-otlp");
  req.body() = std::move(body);
  req.prepare_payload();
  req.keep_alive(true);

  std::string why;
  for (int attempt = 0; attempt < 2 && !st->stopped; ++attempt) {
    if (st->conn && !st->conn->Serves(o)) st->conn.reset();
    bool reused = st->conn != nullptr;
    if (!reused) {
      why = co_await Connect(st, o, std::min(end, Clock::now() + o.connect_timeout));
      if (!why.empty()) break;
    }
    Conn& c = *st->conn;
    c.tcp().expires_at(end);
    ResponseParser parser;
    parser.body_limit(kResponseLimit);
    error_code ec;
    if (c.tls)
      ec = co_await Exchange(*c.tls, c.buffer, req, parser);
    else
      ec = co_await Exchange(*c.plain, c.buffer, req, parser);
    if (ec) {
      st->conn.reset();
      if (reused && !parser.got_some() && ClosedWhileIdle(ec)) continue;  // once, on a new one
      why = ec.message();
      break;
    }
    if (!parser.get().keep_alive()) st->conn.reset();
    unsigned status = parser.get().result_int();
    if (status < 200 || status >= 300) {
      why = "collector answered " + std::to_string(status);
      break;
    }
    co_return done(true, "");
  }
  if (st->stopped && why.empty()) why = "stopped";
  co_return done(false, why);
}

}  // namespace geogate::tracing
