#include "proxy/session.h"

#include <charconv>
#include <cstring>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include "common/await.h"
#include "common/block_cache.h"
#include "proxy/client_writer.h"
#include "proxy/connection_limits.h"
#include "proxy/cors.h"
#include "proxy/headers.h"
#include "proxy/request_handler.h"
#include "routing/proxy_protocol.h"

namespace geogate::proxy {

namespace {

constexpr size_t kLingerMaxBytes = 1 << 20;
constexpr auto kLingerTimeout = std::chrono::seconds(1);
constexpr auto kTlsShutdownTimeout = std::chrono::milliseconds(500);

routing::IpAddr ToIpAddr(const net::ip::address& a) {
  if (a.is_v4()) return routing::IpAddr::FromV4(a.to_v4().to_uint());
  return routing::IpAddr::FromV6(a.to_v6().to_bytes());
}

void Spawn(Worker& worker, net::ip::tcp::socket socket, const net::ip::tcp::endpoint& peer,
           ListenerSpec spec, std::optional<ErrorKind> refusal) {
  common::PooledPtr<Session> session = common::MakePooled<Session>(
      worker, Stream(std::move(socket)), ToIpAddr(peer.address()), spec, refusal);
  Session* s = session.get();
  net::co_spawn(worker.ioc(), s->Run(std::move(session)), net::detached);
}

}  // namespace

// In a block of the block cache: it must fit its largest class.
static_assert(sizeof(Session) <= common::block_cache::kLargestBlock);

void SpawnSession(Worker& worker, net::ip::tcp::socket socket, const net::ip::tcp::endpoint& peer,
                  ListenerSpec spec) {
  Spawn(worker, std::move(socket), peer, spec, std::nullopt);
}

void SpawnRefusal(Worker& worker, net::ip::tcp::socket socket, const net::ip::tcp::endpoint& peer,
                  ListenerSpec spec, ErrorKind why) {
  Spawn(worker, std::move(socket), peer, spec, why);
}

// No TCP_NODELAY here: the worker's listeners have it, and Linux gives an
// accepted socket its listener's (Worker::AddAcceptor).
Session::Session(Worker& worker, Stream stream, const routing::IpAddr& peer, ListenerSpec spec,
                 std::optional<ErrorKind> refusal)
    : worker_(worker),
      spec_(spec),
      peer_(peer),
      stream_(std::move(stream)),
      buffer_(common::BufferPool::Allocator<char>(worker.read_buffers())),
      watchdog_(worker.timers(), worker.time()),
      refusal_(refusal) {
  worker_.Register(this);
  worker_.shared().open_connections.fetch_add(1, std::memory_order_relaxed);
  if (refusal_) {
    worker_.refusals_in_flight()++;
    return;
  }
  worker_.metrics().connections_accepted++;
  EnterIdle(worker_.time().monotonic());  // until its client sends something
}

Session::~Session() {
  worker_.idle_sessions().Remove(*this);
  if (counted_ip_) worker_.shared().connections_per_ip->Remove(client_ip_);
  worker_.Unregister(this);
  worker_.shared().open_connections.fetch_sub(1, std::memory_order_relaxed);
  if (refusal_)
    worker_.refusals_in_flight()--;
  else
    worker_.metrics().connections_closed++;
}

void Session::EnterIdle(health::MonotonicTime now) {
  idle_ = true;
  if (!closed_ && !refusal_)
    worker_.idle_sessions().Push(*this, health::ToNanos(now));
  else
    worker_.idle_sessions().Remove(*this);
}

void Session::LeaveIdle() {
  idle_ = false;
  worker_.idle_sessions().Remove(*this);
}

void Session::ApplyLimits(const config::Limits& limits) {
  if (!waiting_ || closed_) return;
  watchdog_.Guard(&*stream_,
                  waiting_since_ + (waiting_first_ ? limits.header_timeout : limits.idle_timeout));
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  worker_.idle_sessions().Remove(*this);
  stream_->close();
}

void Session::Guard(health::Millis timeout, Watchdog::OnExpiry what) {
  watchdog_.Guard(&*stream_, worker_.time().monotonic() + timeout, what);
}

bool Session::AdmitClient() {
  uint32_t limit = (*worker_.runtime())->config->gateway.limits.max_connections_per_ip;
  ConnectionsPerIp* counts = worker_.shared().connections_per_ip;
  if (limit == 0 || counts == nullptr) return true;
  client_ip_ = proxy_source_.value_or(peer_);
  if (counts->TryAdd(client_ip_, limit)) {
    counted_ip_ = true;
    return true;
  }
  worker_.metrics().connections_rejected_per_ip++;
  return false;
}

net::awaitable<void> Session::Refuse(ErrorKind why) {
  LeaveIdle();
  if (spec_.tls && !co_await Handshake()) co_return;
  std::string_view message =
      why == ErrorKind::kIpConnectionLimit
          ? "too many connections from this address (gateway.limits.max_connections_per_ip); "
            "retry later"
          : "the gateway is at gateway.limits.max_connections and every connection is busy; "
            "retry later";
  co_await SendError(nullptr, why, message, {}, /*retry_after_s=*/1);
  co_await LingeringClose();
}

std::string_view Session::source_text() {
  if (source_text_size_ == 0)
    source_text_size_ = static_cast<uint8_t>(source().ToChars(source_text_));
  return {source_text_, source_text_size_};
}

net::awaitable<bool> Session::ReadProxyHeader() {
  const auto& limits = (*worker_.runtime())->config->gateway.limits;
  Guard(limits.header_timeout);
  for (;;) {
    auto data = buffer_.data();
    routing::ProxyParseResult r = routing::ParseProxyProtocol(
        std::span<const uint8_t>(static_cast<const uint8_t*>(data.data()), data.size()));
    if (r.status == routing::ProxyParseStatus::kDone) {
      buffer_.consume(r.header.consumed);
      if (!r.header.local && r.header.source) proxy_source_ = r.header.source;
      watchdog_.Disarm();
      co_return true;
    }
    if (r.status == routing::ProxyParseStatus::kInvalid ||
        buffer_.size() >= routing::kMaxProxyHeaderBytes)
      co_return false;
    // Read only what the header can still need, so bytes after it stay in
    // the socket for the TLS layer or the HTTP parser.
    auto [ec, n] = co_await stream_->async_read_tcp(buffer_.prepare(512), common::kAwait);
    if (ec) co_return false;
    buffer_.commit(n);
  }
}

net::awaitable<bool> Session::Handshake() {
  const Runtime& rt = **worker_.runtime();
  const auto& limits = rt.config->gateway.limits;
  tls_context_ = spec_.index < rt.listener_tls.size() ? rt.listener_tls[spec_.index] : nullptr;
  if (!tls_context_) co_return false;
  Stream::Socket tcp = std::move(stream_->lowest());
  stream_.emplace(std::move(tcp), *tls_context_);
  Guard(limits.header_timeout);
  auto [ec, used] = co_await stream_->tls().async_handshake(net::ssl::stream_base::server,
                                                            buffer_.data(), common::kAwaitInFrame);
  watchdog_.Disarm();
  if (ec) {
    worker_.metrics().tls_handshake_failures++;
    co_return false;
  }
  buffer_.consume(used);
  worker_.metrics().tls_handshakes++;
  if (SSL_session_reused(stream_->tls().native_handle()) == 1) worker_.metrics().tls_resumed++;
  co_return true;
}

boost::system::error_code Session::ParseBuffered(RequestParser& parser, bool header_only) {
  boost::system::error_code ec;
  while (buffer_.size() != 0 && !parser.is_done() && !(header_only && parser.is_header_done())) {
    size_t used = parser.put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) return {};
    if (ec || used == 0) break;
  }
  return ec;
}

net::awaitable<boost::system::error_code> Session::ReadHeader(RequestParser& parser,
                                                              health::Millis header_timeout) {
  // A total deadline: it interrupts the read rather than closing, so a
  // 408 can still be sent.
  Guard(header_timeout, Watchdog::OnExpiry::kInterrupt);
  auto [rec, n] = co_await http::async_read_header(*stream_, buffer_, parser, common::kAwait);
  bool fired = watchdog_.expired();
  watchdog_.Disarm();
  co_return fired ? beast::error::timeout : rec;
}

net::awaitable<boost::system::error_code> Session::ReadBody(RequestParser& parser,
                                                            health::Millis body_timeout) {
  // A total deadline like the head's, from the end of the head: a client
  // that trickles its body gets 408 when it passes, however steadily the
  // bytes come, and a stalled one no longer holds the connection silently.
  Guard(body_timeout, Watchdog::OnExpiry::kInterrupt);
  boost::system::error_code ec;
  if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    auto [wec, wn] = co_await net::async_write(*stream_, net::buffer(kContinue), common::kAwait);
    ec = wec;
  }
  if (!ec) {
    auto [rec, n] = co_await http::async_read(*stream_, buffer_, parser, common::kAwait);
    ec = rec;
  }
  bool fired = watchdog_.expired();
  watchdog_.Disarm();
  co_return fired ? beast::error::timeout : ec;
}

// Not in Run: a local there would be in its frame, which every open
// connection holds.
bool Session::BeginIdle(bool first) {
  // One clock read for both: nothing waits between them.
  const health::MonotonicTime now = worker_.time().monotonic();
  EnterIdle(now);
  if (buffer_.size() != 0) return true;  // the next request is here already
  if (!worker_.accepting()) return false;
  const config::Limits& limits = (*worker_.CurrentRuntime())->config->gateway.limits;
  StartWaiting(first ? limits.header_timeout : limits.idle_timeout, first, now);
  return true;
}

void Session::StartWaiting(health::Millis timeout, bool first, health::MonotonicTime now) {
  // Between requests: the Watchdog's deadline, not a timer armed and
  // cancelled around every read.
  waiting_ = true;
  waiting_first_ = first;
  waiting_since_ = now;
  watchdog_.Guard(&*stream_, waiting_since_ + timeout);
  // The read buffer went back to the pool: an idle connection holds only
  // first_read_. A read into it queues without a system call, like one into
  // the buffer, where a wait for readability (no buffer at all) would cost
  // Asio an epoll_ctl per request; a parked connection pays that once.
  buffer_.shrink_to_fit();
  if (first_read_ == nullptr) first_read_ = common::MakePooled<FirstRead>();
}

bool Session::RequestPark() {
  // Parked already: waiting without a first-read block (StartWaiting takes
  // one for every wait Run makes).
  if (!owned_ || !waiting_ || first_read_ == nullptr || closed_ || park_) return false;
  if (!stream_->cancel_plain()) return false;
  park_ = true;
  return true;
}

void Session::Park(common::PooledPtr<Session> self) {
  park_ = false;
  first_read_.reset();
  worker_.metrics().connections_parked++;
  WaitParked(std::move(self));
}

// Still waiting: the deadline set by StartWaiting stands, and closing the
// stream (the deadline, Close, a drain) ends this wait, and with its
// handler the session. A wait for readability re-arms the socket in epoll
// (Asio's epoll_ctl), once per idle spell, and the read it saves Run's
// frames for is the same one system call as an asynchronous read's.
void Session::WaitParked(common::PooledPtr<Session> self) {
  Stream::Socket& socket = stream_->lowest();
  socket.async_wait(net::socket_base::wait_read,
                    [self = std::move(self)](boost::system::error_code ec) mutable {
                      Unpark(std::move(self), ec);
                    });
}

void Session::Unpark(common::PooledPtr<Session> self, boost::system::error_code ec) {
  Session& s = *self;
  size_t n = 0;
  if (!ec && !s.closed_) {
    n = s.stream_->TryReadNow(s.buffer_.prepare(kClientReadBytes), ec);
    if (ec == net::error::would_block) {  // woken with nothing to read
      s.buffer_.shrink_to_fit();
      s.WaitParked(std::move(self));
      return;
    }
  }
  if (!s.closed_ && s.TakeRead(ec, n)) {
    net::co_spawn(s.worker_.ioc(), s.Run(std::move(self), /*resumed=*/true), net::detached);
    return;
  }
  // As Run ends a plain connection whose client went.
  if (!s.closed_) s.stream_->shutdown_send();
}

bool Session::TakeFirstRead(boost::system::error_code ec, size_t n) {
  if (!ec) {
    auto space = buffer_.prepare(kClientReadBytes);  // from the pool
    std::memcpy(space.data(), first_read_->bytes, n);
  }
  first_read_.reset();  // the next wait takes one again
  return TakeRead(ec, n);
}

bool Session::TakeRead(boost::system::error_code ec, size_t n) {
  waiting_ = false;
  watchdog_.Disarm();
  if (ec) {
    buffer_.shrink_to_fit();  // back to the pool
    return false;
  }
  buffer_.commit(n);
  // A larger request's rest is read by ReadHeader or ReadBody, under their
  // deadlines.
  return true;
}

net::awaitable<bool> Session::Send(ResponseHead& head, std::string_view body, bool keep_alive,
                                   bool head_only, uint64_t& bytes_out) {
  head.SetFraming(body.size(), false, keep_alive);
  if (head_only) body = {};  // Content-Length stays the body's
  const auto& limits = (*worker_.runtime())->config->gateway.limits;
  ClientWriter out(*stream_, watchdog_, worker_.time(), limits.idle_timeout, bytes_out,
                   worker_.metrics().bytes_out);
  bool ok = out.TryWrite(head.text(), body);
  if (!ok) ok = co_await out.Flush();
  watchdog_.Disarm();
  co_return ok;
}

net::awaitable<bool> Session::SendError(const Request* req, ErrorKind kind,
                                        std::string_view message, std::string_view request_id,
                                        int retry_after_s, uint64_t* bytes_out) {
  ErrorSpec spec = SpecOf(kind);
  ResponseHead res(spec.status, {}, req ? req->version() : 11);
  res.set(http::field::content_type, "application/json");
  res.set(http::field::server, "geogate");
  if (!request_id.empty()) res.set("x-request-id", request_id);
  res.set("x-geogate-edge", (*worker_.runtime())->config->gateway.edge);
  char retry_after[16];
  if (retry_after_s >= 0) {
    auto [end, ec] = std::to_chars(retry_after, retry_after + sizeof retry_after, retry_after_s);
    res.set(http::field::retry_after, std::string_view(retry_after, end - retry_after));
  }
  if (req != nullptr) {
    const config::Cors* cors = (*worker_.runtime())->cors(spec_.index);
    if (cors != nullptr) AddCorsResponseFields(res, cors, (*req)[http::field::origin]);
  }
  std::string body = ErrorBody(kind, message);
  // Errors about the request's framing leave the connection in an unknown
  // state: close it. Policy errors (404, 451, 503...) keep it.
  bool keep = req != nullptr && req->keep_alive() && spec.status != 400 && spec.status != 408 &&
              spec.status != 413 && spec.status != 431 &&
              !worker_.shared().draining.load(std::memory_order_relaxed);
  uint64_t no_request = 0;
  bool ok = co_await Send(res, body, keep, req != nullptr && req->method() == http::verb::head,
                          bytes_out != nullptr ? *bytes_out : no_request);
  co_return ok&& keep;
}

net::awaitable<void> Session::LingeringClose() {
  // After an error answered before the whole request was read, stop sending
  // but keep draining what the client still sends for a moment, so its TCP
  // stack does not turn our close into a reset that destroys the response.
  stream_->shutdown_send();
  Guard(kLingerTimeout);
  size_t total = 0;
  char sink[4096];
  while (total < kLingerMaxBytes) {
    auto [rec, n] = co_await stream_->async_read_tcp(net::buffer(sink), common::kAwait);
    if (rec) break;
    total += n;
  }
  watchdog_.Disarm();
}

namespace {
// Counts a request in its worker's requests_in_progress() while in scope.
class InProgress {
 public:
  explicit InProgress(size_t& n) : n_(n) { ++n_; }
  ~InProgress() { --n_; }
  InProgress(const InProgress&) = delete;
  InProgress& operator=(const InProgress&) = delete;

 private:
  size_t& n_;
};
}  // namespace

net::awaitable<void> Session::Run(common::PooledPtr<Session> self, bool resumed) {
  owned_ = self != nullptr;
  if (!resumed && !co_await Open()) co_return;

  // This frame is what a connection keeps while it waits for its client,
  // until it parks (RequestPark): only the loop. A request's parser and
  // message are in cached blocks, the message alone while it is served; the
  // awaiters of the answers to requests that cannot be read live in
  // ReceiveRequest's frame, which is gone once the request is read. The
  // first read of the next request is awaited here rather than in a
  // coroutine of its own.
  bool first = !resumed;
  Served served = Served::kClose;
  while (!closed_) {
    if (resumed) {
      resumed = false;  // the parked read brought this request's first bytes
    } else {
      if (!BeginIdle(first)) break;
      if (buffer_.size() == 0) {
        auto [ec, n] =
            co_await stream_->async_read_some(net::buffer(first_read_->bytes), common::kAwait);
        if (ec == net::error::operation_aborted && park_ && !closed_) {
          Park(std::move(self));  // this frame goes; the parked read calls Run again
          co_return;
        }
        park_ = false;  // the read completed before RequestPark's cancel reached it
        if (!TakeFirstRead(ec, n)) break;
      }
    }
    LeaveIdle();
    first = false;
    {
      Received got = co_await ReceiveRequest();
      served = got.served;
      if (got.request) {
        InProgress counted(worker_.requests_in_progress());
        bool keep = co_await HandleRequest(*this, got.pinned, *got.request);
        served = keep ? Served::kKeep : Served::kClose;
      }
    }  // the request, its parser and its runtime go before the next wait
    if (served != Served::kKeep) break;
    // The client sends its next request only once it has read this
    // response: a read now would find nothing (Asio tries it at once) and
    // cost a system call. While other requests keep the worker busy, let
    // their handlers run first; by then the next request is usually there.
    if (worker_.requests_in_progress() > 0 && buffer_.size() == 0 && !stream_->is_tls())
      co_await net::post(common::kAwait);  // to this coroutine's executor
  }
  if (closed_) co_return;
  if (served == Served::kLinger) {
    co_await LingeringClose();
  } else if (stream_->is_tls()) {
    co_await ShutdownTls();
  } else {
    stream_->shutdown_send();
  }
}

// Not in Run: their awaiters would be in Run's frame, which every open
// connection holds.
net::awaitable<bool> Session::Open() {
  // Each co_await a statement of its own: written with co_awaits inside
  // && and || conditions, this crashed under GCC 12 (at the frame's end,
  // it destroyed an awaitable that the skipped co_await never made).
  if (spec_.proxy_protocol) {
    bool read = co_await ReadProxyHeader();
    if (!read) {
      worker_.metrics().proxy_protocol_failures++;
      co_return false;
    }
  }
  std::optional<ErrorKind> refusal = refusal_;
  if (!refusal && !AdmitClient()) refusal = ErrorKind::kIpConnectionLimit;
  if (refusal) {
    co_await Refuse(*refusal);
    co_return false;
  }
  if (!spec_.tls) co_return true;
  bool shaken = co_await Handshake();
  co_return shaken;
}

net::awaitable<void> Session::ShutdownTls() {
  Guard(kTlsShutdownTimeout);
  co_await stream_->tls().async_shutdown(common::kAwaitInFrame);
  watchdog_.Disarm();
}

Session::Received Session::Received::None(Served how) {
  Received r;
  r.served = how;
  return r;
}

net::awaitable<Session::Received> Session::ReceiveRequest() {
  // The read limits of this request are those in force when its first
  // bytes arrived; its decision is made under the runtime current when
  // its head is complete (re-read below), however long it waited.
  PinnedRuntime reading = worker_.CurrentRuntime();
  const config::Limits& limits = (*reading)->config->gateway.limits;

  // The parser (and the request it makes) in a cached block (288 bytes),
  // not in this frame: with them the frame was 1.3 KiB, past the block
  // cache's largest class, and cost a malloc per request.
  common::PooledPtr<RequestParser> parser_block = common::MakePooled<RequestParser>();
  RequestParser& parser = *parser_block;
  parser.header_limit(limits.max_header_bytes);
  parser.body_limit(limits.max_body_bytes);
  // Usually the whole request arrived with the read above: parse it from
  // the buffer without another asynchronous round, and only wait (with the
  // header deadline) when the head is still incomplete.
  boost::system::error_code ec = ParseBuffered(parser, /*header_only=*/true);
  if (!ec && !parser.is_header_done()) ec = co_await ReadHeader(parser, limits.header_timeout);
  if (ec) {
    if (ec == http::error::header_limit) {
      co_await SendError(nullptr, ErrorKind::kHeadersTooLarge,
                         "request headers exceed gateway.limits.max_header_bytes");
      co_return Received::None(Served::kLinger);
    }
    if (ec == http::error::body_limit) {
      // An oversized Content-Length: Beast refuses it once the head is
      // complete, so the answer has the request's fields (CORS, version).
      co_await SendError(&parser.get(), ErrorKind::kBodyTooLarge,
                         "request body exceeds gateway.limits.max_body_bytes");
      co_return Received::None(Served::kLinger);
    }
    if (ec == beast::error::timeout) {
      // Beast consumes nothing until the head is complete: buffered bytes
      // are what tells a slow client from an idle one.
      if (parser.got_some() || buffer_.size() != 0) {
        worker_.metrics().header_timeouts++;
        co_await SendError(nullptr, ErrorKind::kHeaderTimeout,
                           "request headers not received within gateway.limits.header_timeout_ms");
      }
      co_return Received::None(Served::kClose);
    }
    if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      co_await SendError(nullptr, ErrorKind::kBadRequest,
                         std::string("malformed request: ") + ec.message());
      co_return Received::None(Served::kLinger);
    }
    co_return Received::None(Served::kClose);
  }
  // The head is complete: this request is decided under the runtime
  // published last, even if a reload came while the head was arriving.
  PinnedRuntime pinned = worker_.CurrentRuntime();
  Request& head = parser.get();
  // RFC 9112 §6.1: a request whose Transfer-Encoding does not end in
  // "chunked" has no determinable length: a smuggling shape, refuse it.
  if (head.count(http::field::transfer_encoding) != 0 && !parser.chunked()) {
    co_await SendError(&head, ErrorKind::kBadRequest,
                       "Transfer-Encoding other than chunked is not accepted");
    co_return Received::None(Served::kLinger);
  }
  if (!parser.is_done()) ec = ParseBuffered(parser, /*header_only=*/false);
  if (!ec && !parser.is_done()) ec = co_await ReadBody(parser, limits.body_timeout);
  if (ec) {
    if (ec == http::error::body_limit) {
      co_await SendError(&parser.get(), ErrorKind::kBodyTooLarge,
                         "request body exceeds gateway.limits.max_body_bytes");
      co_return Received::None(Served::kLinger);
    }
    if (ec == beast::error::timeout) {
      worker_.metrics().body_timeouts++;
      co_await SendError(&parser.get(), ErrorKind::kBodyTimeout,
                         "request body not received within gateway.limits.body_timeout_ms");
      co_return Received::None(Served::kLinger);
    }
    if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::partial_message && ec != http::error::end_of_stream) {
      co_await SendError(&parser.get(), ErrorKind::kBadRequest,
                         std::string("malformed request body: ") + ec.message());
      co_return Received::None(Served::kLinger);
    }
    co_return Received::None(Served::kClose);
  }
  // The message alone (128 bytes) is kept while the request is served,
  // which may take minutes; the parser's block (448) goes now.
  common::PooledPtr<Request> request = common::MakePooled<Request>(parser.release());
  parser_block.reset();
  worker_.metrics().bytes_in += request->body().size();
  // A pipelined request keeps its bytes; otherwise the buffer goes back
  // to the pool while the request is served (a stream may take minutes).
  if (buffer_.size() == 0) buffer_.shrink_to_fit();
  co_return Received{Served::kKeep, std::move(request), std::move(pinned)};
}

}  // namespace geogate::proxy
