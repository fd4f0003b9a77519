#include "health/http_probe_client.h"

#include <openssl/ssl.h>

#include <array>
#include <optional>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "common/await.h"
#include "common/bounded_resolver.h"
#include "health/load_report_parser.h"

namespace geogate::health {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;

constexpr uint64_t kHealthBodyLimit = 64 * 1024;
constexpr uint64_t kMetricsBodyLimit = 4 * 1024 * 1024;
constexpr uint32_t kHeaderLimit = 16 * 1024;

std::string Unbracket(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    return host.substr(1, host.size() - 2);
  return host;
}

std::string HostHeader(const std::string& host, uint16_t port, bool tls) {
  std::string bare = Unbracket(host);
  std::string out = bare.find(':') != std::string::npos ? "[" + bare + "]" : bare;
  if (port != (tls ? 443 : 80)) out += ":" + std::to_string(port);
  return out;
}

FailureReason ClassifyConnect(const ErrorCode& ec) {
  if (ec == beast::error::timeout) return FailureReason::kConnectTimeout;
  // Refused, unreachable, reset during connect: nothing is serving there now.
  return FailureReason::kConnectRefused;
}

FailureReason ClassifyIo(const ErrorCode& ec) {
  static const auto& http_category = http::make_error_code(http::error::bad_version).category();
  if (ec == beast::error::timeout) return FailureReason::kProbeTimeout;
  if (ec == http::error::end_of_stream || ec == asio::error::eof ||
      ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
      ec == asio::error::connection_aborted || ec == ssl::error::stream_truncated)
    return FailureReason::kReset;
  if (ec.category() == http_category) return FailureReason::kProtocolError;
  if (ec.category() == asio::error::get_ssl_category()) return FailureReason::kTlsError;
  return FailureReason::kReset;
}

struct Exchange {
  FailureReason reason = FailureReason::kNone;
  int status = 0;
  bool keep_alive = false;
  std::string body;
};

http::request<http::empty_body> MakeRequest(const std::string& target, const std::string& host,
                                            bool want_json) {
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "geogate-health/" GEOGATE_VERSION);
  req.set(http::field::accept, want_json ? "application/json, */*" : "*/*");
  req.keep_alive(true);
  return req;
}

// One request and its response read into a string, with the whole exchange
// under `deadline`. A body over the cap ends the exchange with the status
// known, no body, and the connection marked for closing.
template <class Stream>
asio::awaitable<Exchange> FetchSmall(Stream& stream, beast::flat_buffer& buffer,
                                     const http::request<http::empty_body>& req,
                                     Clock::time_point deadline) {
  Exchange out;
  beast::get_lowest_layer(stream).expires_at(deadline);
  auto [wec, wn] = co_await http::async_write(stream, req, common::kAwait);
  if (wec) {
    out.reason = ClassifyIo(wec);
    co_return out;
  }
  http::response_parser<http::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(kHealthBodyLimit);
  auto [rec, rn] = co_await http::async_read(stream, buffer, parser, common::kAwait);
  if (rec == http::error::body_limit && parser.is_header_done()) {
    out.status = static_cast<int>(parser.get().result_int());
    co_return out;  // keep_alive false: the rest of the body is still on the wire
  }
  if (rec) {
    out.reason = ClassifyIo(rec);
    co_return out;
  }
  http::response<http::string_body> res = parser.release();
  out.status = static_cast<int>(res.result_int());
  out.keep_alive = res.keep_alive();
  out.body = std::move(res.body());
  co_return out;
}

// One request whose body is fed to `scanner` chunk by chunk, so a large
// /metrics page costs a fixed buffer, not its size.
template <class Stream>
asio::awaitable<Exchange> FetchScanned(Stream& stream, beast::flat_buffer& buffer,
                                       const http::request<http::empty_body>& req,
                                       Clock::time_point deadline, PrometheusLoadScanner& scanner) {
  Exchange out;
  beast::get_lowest_layer(stream).expires_at(deadline);
  auto [wec, wn] = co_await http::async_write(stream, req, common::kAwait);
  if (wec) {
    out.reason = ClassifyIo(wec);
    co_return out;
  }
  http::response_parser<http::buffer_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(kMetricsBodyLimit);
  auto [hec, hn] = co_await http::async_read_header(stream, buffer, parser, common::kAwait);
  if (hec) {
    out.reason = ClassifyIo(hec);
    co_return out;
  }
  out.status = static_cast<int>(parser.get().result_int());
  const bool scan = out.status >= 200 && out.status < 300;
  std::array<char, 16 * 1024> chunk;
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, common::kAwait);
    if (ec == http::error::need_buffer) ec = {};  // the chunk is full: scan it, go on
    const size_t got = chunk.size() - parser.get().body().size;
    if (scan) scanner.feed(std::string_view(chunk.data(), got));
    if (ec) {
      out.reason = ClassifyIo(ec);
      co_return out;
    }
  }
  scanner.finish();
  out.keep_alive = parser.get().keep_alive();
  co_return out;
}

}  // namespace

// ---------------------------------------------------------------------------

HttpProbeClient::Options HttpProbeClient::Options::From(const config::Backend& backend,
                                                        const config::Health& health) {
  Options o;
  o.host = backend.host;
  o.port = backend.port != 0 ? backend.port : (backend.tls ? 443 : 80);
  o.tls = backend.tls;
  o.health_target = backend.base_path + health.path;
  if (o.health_target.empty() || o.health_target.front() != '/')
    o.health_target.insert(o.health_target.begin(), '/');
  o.json_load = health.load_report == "auto";
  if (!health.load_report.empty() && health.load_report.front() == '/')
    o.load_target = backend.base_path + health.load_report;
  o.timeout = health.timeout;
  o.ca_file = backend.ca_file;
  o.tls_verify = backend.tls_verify;
  return o;
}

class HttpProbeClient::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, Options options)
      : io_(io),
        options_(std::move(options)),
        bare_host_(Unbracket(options_.host)),
        host_header_(HostHeader(options_.host, options_.port, options_.tls)),
        port_(options_.port),
        resolver_(io.get_executor(), options_.lookup) {
    ErrorCode ec;
    address_ = asio::ip::make_address(bare_host_, ec);
    literal_ = !ec;
    if (options_.tls) MakeTlsContext();
  }

  void probe(Callback cb) {
    if (in_flight_) cancel();  // one probe at a time
    cb_ = std::move(cb);
    in_flight_ = true;
    const uint64_t generation = ++generation_;
    asio::co_spawn(io_, Run(shared_from_this(), generation), asio::detached);
  }

  void cancel() {
    ++generation_;  // the coroutine in flight sees this and delivers nothing
    cb_ = nullptr;
    in_flight_ = false;
    phase_ = Phase::kIdle;
    resolver_.Cancel();  // a probe waiting for its lookup ends now
    DropConnection();
  }

  FailureReason TimeoutReason() const {
    return phase_ == Phase::kConnecting ? FailureReason::kConnectTimeout
                                        : FailureReason::kProbeTimeout;
  }
  uint64_t connections_opened() const { return connections_opened_; }
  const Options& options() const { return options_; }

 private:
  enum class Phase : uint8_t { kIdle, kConnecting, kRequesting };

  // One TCP (+TLS) connection. A probe coroutine holds the one it uses, so
  // an abandoned coroutine unwinding late only ever touches its own, closed,
  // connection and never the next probe's.
  struct Conn {
    Conn(asio::io_context& io, ssl::context* tls_ctx) {
      if (tls_ctx != nullptr) {
        tls.emplace(io, *tls_ctx);
      } else {
        plain.emplace(io);
      }
    }
    beast::tcp_stream& lowest() { return tls ? tls->next_layer() : *plain; }
    void close() {
      lowest().close();
      open = false;
    }
    std::optional<beast::tcp_stream> plain;
    std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
    beast::flat_buffer buffer;
    bool open = false;
  };
  using ConnPtr = std::shared_ptr<Conn>;

  void MakeTlsContext() {
    tls_ctx_.emplace(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(tls_ctx_->native_handle(), TLS1_2_VERSION);
    ErrorCode ec;
    if (options_.tls_verify) {
      tls_ctx_->set_verify_mode(ssl::verify_peer, ec);
      if (!ec) {
        if (options_.ca_file.empty()) {
          tls_ctx_->set_default_verify_paths(ec);
        } else {
          tls_ctx_->load_verify_file(options_.ca_file, ec);
        }
      }
    } else {
      tls_ctx_->set_verify_mode(ssl::verify_none, ec);
    }
    // A CA file that cannot be read fails every probe as a TLS error rather
    // than silently probing without verification.
    tls_ctx_ok_ = !ec;
  }

  void DropConnection() {
    if (conn_) conn_->close();
    conn_.reset();
  }

  static asio::awaitable<void> Run(std::shared_ptr<Impl> self, uint64_t generation) {
    ProbeResult result = co_await self->DoProbe(generation);
    if (generation != self->generation_) co_return;  // cancelled meanwhile
    self->in_flight_ = false;
    self->phase_ = Phase::kIdle;
    Callback cb = std::move(self->cb_);
    self->cb_ = nullptr;
    if (cb) cb(result);
  }

  // The addresses to connect to, or why there are none.
  asio::awaitable<FailureReason> Resolve(Clock::time_point deadline, common::Endpoints& out) {
    if (literal_) {
      out.assign(1, tcp::endpoint(address_, port_));
      co_return FailureReason::kNone;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= std::chrono::milliseconds::zero()) co_return FailureReason::kConnectTimeout;
    auto [ec, endpoints] = co_await resolver_.Resolve(bare_host_, port_, left);
    // Timed out, or an earlier lookup of this name is still stuck.
    if (ec == asio::error::timed_out || ec == asio::error::try_again)
      co_return FailureReason::kConnectTimeout;
    if (ec) co_return FailureReason::kConnectRefused;  // no address: nothing to reach
    out = std::move(endpoints);
    co_return FailureReason::kNone;
  }

  asio::awaitable<FailureReason> connect(Conn& c, Clock::time_point deadline) {
    common::Endpoints endpoints;
    if (FailureReason why = co_await Resolve(deadline, endpoints); why != FailureReason::kNone)
      co_return why;
    c.lowest().expires_at(deadline);
    auto [cec, endpoint] = co_await c.lowest().async_connect(endpoints, common::kAwaitInFrame);
    if (cec) co_return ClassifyConnect(cec);
    ++connections_opened_;
    ErrorCode ignored;
    c.lowest().socket().set_option(tcp::no_delay(true), ignored);
    if (c.tls) {
      if (!tls_ctx_ok_) co_return FailureReason::kTlsError;
      // SNI is for host names only (RFC 6066); IP literals are verified
      // against the certificate's IP SANs by host_name_verification.
      if (!literal_ && SSL_set_tlsext_host_name(c.tls->native_handle(), bare_host_.c_str()) != 1)
        co_return FailureReason::kTlsError;
      if (options_.tls_verify) {
        ErrorCode vec;
        c.tls->set_verify_callback(ssl::host_name_verification(bare_host_), vec);
        if (vec) co_return FailureReason::kTlsError;
      }
      c.lowest().expires_at(deadline);
      auto [hec] = co_await c.tls->async_handshake(ssl::stream_base::client, common::kAwaitInFrame);
      if (hec) {
        co_return hec == beast::error::timeout ? FailureReason::kConnectTimeout
                                               : FailureReason::kTlsError;
      }
    }
    c.open = true;
    co_return FailureReason::kNone;
  }

  // Connects when there is no open connection. @return kNone or why not.
  asio::awaitable<FailureReason> EnsureConnected(uint64_t generation, ConnPtr& conn,
                                                 Clock::time_point deadline, bool& connected) {
    if (conn && conn->open) co_return FailureReason::kNone;
    phase_ = Phase::kConnecting;
    conn = std::make_shared<Conn>(io_, tls_ctx_ ? &*tls_ctx_ : nullptr);
    conn_ = conn;
    const FailureReason why = co_await connect(*conn, deadline);
    if (generation != generation_) co_return FailureReason::kNone;  // caller checks too
    phase_ = Phase::kRequesting;
    if (why != FailureReason::kNone) {
      conn->close();
      if (conn_ == conn) conn_.reset();
      co_return why;
    }
    connected = true;
    co_return FailureReason::kNone;
  }

  template <class F>
  asio::awaitable<Exchange> OnStream(Conn& c, F&& f) {
    if (c.tls) co_return co_await f(*c.tls);
    co_return co_await f(*c.plain);
  }

  void release(const ConnPtr& conn, bool keep_alive) {
    if (keep_alive) return;
    conn->close();
    if (conn_ == conn) conn_.reset();
  }

  asio::awaitable<ProbeResult> DoProbe(uint64_t generation) {
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = start + options_.timeout;
    ConnPtr conn = conn_;
    bool connected = false;  // this probe opened the connection it used
    const auto req = MakeRequest(options_.health_target, host_header_, options_.json_load);

    Exchange ex;
    Clock::time_point request_start;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const FailureReason why = co_await EnsureConnected(generation, conn, deadline, connected);
      if (generation != generation_) co_return ProbeResult{};
      if (why != FailureReason::kNone) co_return ProbeResult::Failed(why);
      phase_ = Phase::kRequesting;
      request_start = Clock::now();
      ex = co_await OnStream(
          *conn, [&](auto& stream) { return FetchSmall(stream, conn->buffer, req, deadline); });
      if (generation != generation_) co_return ProbeResult{};
      // A reused connection found closed: the server timed it out between
      // probes. That is not the backend failing; reconnect once.
      if (ex.reason == FailureReason::kReset && !connected && attempt == 0) {
        conn->close();
        if (conn_ == conn) conn_.reset();
        conn.reset();
        continue;
      }
      break;
    }
    const Clock::time_point end = Clock::now();
    if (ex.reason != FailureReason::kNone) {
      release(conn, false);  // mid-exchange failure: the connection is unusable
      co_return ProbeResult::Failed(ex.reason, ex.status);
    }
    release(conn, ex.keep_alive);

    ProbeResult result;
    result.status = ex.status;
    result.rtt = std::chrono::duration_cast<std::chrono::microseconds>(
        end - (connected ? start : request_start));
    if (ex.status < 200 || ex.status > 299) {
      result.reason = FailureReason::kBadStatus;
      co_return result;
    }
    result.ok = true;
    if (options_.json_load && !ex.body.empty()) result.load = ParseJsonLoad(ex.body);

    if (!options_.load_target.empty()) {
      // Best effort: leave an eighth of the timeout so the caller's own
      // timeout never fires because of the load report.
      const Clock::time_point load_deadline = deadline - options_.timeout / 8;
      if (Clock::now() < load_deadline) {
        bool reconnected = false;
        conn = conn_;
        const FailureReason why =
            co_await EnsureConnected(generation, conn, load_deadline, reconnected);
        if (generation != generation_) co_return ProbeResult{};
        if (why == FailureReason::kNone) {
          PrometheusLoadScanner scanner;
          const auto load_req = MakeRequest(options_.load_target, host_header_, false);
          Exchange lx = co_await OnStream(*conn, [&](auto& stream) {
            return FetchScanned(stream, conn->buffer, load_req, load_deadline, scanner);
          });
          if (generation != generation_) co_return ProbeResult{};
          release(conn, lx.reason == FailureReason::kNone && lx.keep_alive);
          if (lx.reason == FailureReason::kNone && lx.status >= 200 && lx.status <= 299)
            result.load = scanner.result();
        }
      }
    }
    co_return result;
  }

  asio::io_context& io_;
  const Options options_;
  const std::string bare_host_;
  const std::string host_header_;
  const uint16_t port_;
  asio::ip::address address_;  // bare_host_ when it is an IP literal (literal_)
  bool literal_ = false;
  common::BoundedResolver resolver_;  // host names only
  std::optional<ssl::context> tls_ctx_;
  bool tls_ctx_ok_ = true;

  ConnPtr conn_;  // the keep-alive connection, when one is open
  Callback cb_;
  uint64_t generation_ = 0;
  bool in_flight_ = false;
  Phase phase_ = Phase::kIdle;
  uint64_t connections_opened_ = 0;
};

HttpProbeClient::HttpProbeClient(asio::io_context& io, Options options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

HttpProbeClient::~HttpProbeClient() {
  impl_->cancel();
}

void HttpProbeClient::probe(Callback cb) {
  impl_->probe(std::move(cb));
}
void HttpProbeClient::cancel() {
  impl_->cancel();
}
void HttpProbeClient::close() {
  impl_->cancel();
}
FailureReason HttpProbeClient::TimeoutReason() const {
  return impl_->TimeoutReason();
}
uint64_t HttpProbeClient::connections_opened() const {
  return impl_->connections_opened();
}
const HttpProbeClient::Options& HttpProbeClient::options() const {
  return impl_->options();
}

ProbeClientPtr HttpProbeClientFactory::create(const config::Backend& backend,
                                              const config::Health& health) {
  return std::make_unique<HttpProbeClient>(io_, HttpProbeClient::Options::From(backend, health));
}

}  // namespace geogate::health
