// One client connection: optional PROXY-protocol header, optional TLS
// handshake, then HTTP/1.1 requests read with the limits and deadlines of
// [gateway.limits], dispatched to the proxy or answered locally.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>

#include "common/block_cache.h"
#include "common/buffer_pool.h"
#include "proxy/headers.h"
#include "proxy/idle_list.h"
#include "proxy/openai_error.h"
#include "proxy/request.h"
#include "proxy/response_head.h"
#include "proxy/stream.h"
#include "proxy/watchdog.h"
#include "proxy/worker.h"
#include "routing/ip_addr.h"

namespace geogate::proxy {

namespace http = boost::beast::http;
// A connection's read buffer: kClientReadBytes from the worker's pool, given
// back whenever the connection waits with nothing buffered.
using ReadBuffer = beast::basic_flat_buffer<common::BufferPool::Allocator<char>>;
/// What an idle connection reads its next request's first bytes into.
inline constexpr size_t kFirstReadBytes = 512;

/// Starts serving a connection accepted from `peer` (the address the
/// accept returned: no getpeername) on the worker's io_context.
void SpawnSession(Worker& worker, net::ip::tcp::socket socket, const net::ip::tcp::endpoint& peer,
                  ListenerSpec spec);
/// Answers an accepted connection that a limit refuses with `why` (a 503,
/// after the PROXY header and TLS handshake when the listener has them).
void SpawnRefusal(Worker& worker, net::ip::tcp::socket socket, const net::ip::tcp::endpoint& peer,
                  ListenerSpec spec, ErrorKind why);

/// Idle (waiting for its client) connections sit in the worker's IdleList.
class Session : public IdleHook {
 public:
  /// A connection from `peer` over `stream` (an accepted socket; in tests
  /// an in-memory stream); `refusal` set: answered with a 503 and closed.
  Session(Worker& worker, Stream stream, const routing::IpAddr& peer, ListenerSpec spec,
          std::optional<ErrorKind> refusal = std::nullopt);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Serves the connection until it closes. `self`, when given, is this
  /// session in a block of the worker's block cache (SpawnSession): Run's
  /// frame owns it, so a connection is one cached block and one frame,
  /// not a frame of its own holding the session (over 1 KiB: a malloc).
  /// @param resumed a parked connection whose client sent again: its first
  ///        bytes are buffered, and the set-up (PROXY header, TLS) is done.
  net::awaitable<void> Run(common::PooledPtr<Session> self = {}, bool resumed = false);

  // ---- used by the worker (drain) ----------------------------------------
  /// True while waiting for the next request on a keep-alive connection.
  bool idle() const { return idle_; }
  /// Closes the socket; pending operations end with operation_aborted.
  void Close();
  /// Asks a connection that waits for its client to give up its coroutine
  /// frames and first-read block (about 1.4 KiB) until the client sends
  /// again: Run ends, and a wait for readability whose handler owns the
  /// session starts Run again when bytes arrive. Deadlines, Close and
  /// drain apply as before. Only a plain TCP connection that Run owns can
  /// park. @return whether it will park.
  bool RequestPark();
  /// After a reload: a connection waiting for its next request gets the
  /// deadline `limits` give it, counted from when it went idle.
  void ApplyLimits(const config::Limits& limits);

  // ---- used by the request handlers --------------------------------------
  Worker& worker() { return worker_; }
  Stream& stream() { return *stream_; }
  /// Deadlines of the reads and writes of this connection and of the
  /// upstream connection serving its current request.
  Watchdog& watchdog() { return watchdog_; }
  /// Bytes read from the client and not yet parsed. It owns no memory
  /// while the connection waits for its next request, nor while a request
  /// is with the proxy and nothing more was sent.
  ReadBuffer& buffer() { return buffer_; }
  const routing::IpAddr& peer() const { return peer_; }
  const std::optional<routing::IpAddr>& proxy_source() const { return proxy_source_; }
  /// The address the connection came from: the PROXY header's source on
  /// such a listener (once read), else the peer.
  const routing::IpAddr& source() const { return proxy_source_ ? *proxy_source_ : peer_; }
  /// source()'s text, written once for the connection and reused by every
  /// request on it (the client address of the access log, X-Forwarded-For).
  std::string_view source_text();
  bool tls() const { return spec_.tls; }
  /// The listener that accepted this connection, in the set the process
  /// started with (Runtime::listener_tls, listener_cors).
  size_t listener_index() const { return spec_.index; }

  /// Writes a complete answer of the gateway's own through the client
  /// writer: `head` (its fields; the framing is set here: Content-Length,
  /// and Connection: close when `keep_alive` is false) and `body`.
  /// @param head_only the answer to a HEAD request: the head only, with
  ///        the Content-Length the body would have.
  /// @param bytes_out the request's count of bytes sent, added to.
  /// @return false when the write failed.
  net::awaitable<bool> Send(ResponseHead& head, std::string_view body, bool keep_alive,
                            bool head_only, uint64_t& bytes_out);
  /// An OpenAI-shaped error response, with the listener's CORS fields for
  /// the request's Origin (a browser may read why it was refused).
  /// @param bytes_out the request's count of bytes sent, when there is a
  ///        request.
  /// @return whether the connection may be kept open.
  net::awaitable<bool> SendError(const Request* req, ErrorKind kind, std::string_view message,
                                 std::string_view request_id = {}, int retry_after_s = -1,
                                 uint64_t* bytes_out = nullptr);

 private:
  /// A new connection's start: its PROXY header, its admission (a refusal
  /// is answered) and its TLS handshake. @return whether it is served.
  net::awaitable<bool> Open();
  /// Sends a TLS connection's close_notify (under a short deadline).
  net::awaitable<void> ShutdownTls();
  net::awaitable<bool> ReadProxyHeader();
  /// max_connections_per_ip: counts this connection for its client address
  /// (the PROXY source on such a listener). @return false when it is over
  /// the limit (nothing counted).
  bool AdmitClient();
  /// Answers a refused connection with a 503 and closes it.
  net::awaitable<void> Refuse(ErrorKind why);
  /// The connection's deadline (the Watchdog's), `timeout` from now.
  void Guard(health::Millis timeout, Watchdog::OnExpiry what = Watchdog::OnExpiry::kClose);
  /// Enters the worker's idle list, idle since `now` (the caller's clock
  /// reading), or leaves it.
  void EnterIdle(health::MonotonicTime now);
  void LeaveIdle();
  net::awaitable<bool> Handshake();
  /// Between requests: idle (EnterIdle) and, unless the next request's
  /// bytes are buffered already, waiting for them (StartWaiting).
  /// @return false when the worker no longer takes requests (a drain).
  bool BeginIdle(bool first);
  /// Before Run waits for the client's next bytes: the deadline, `timeout`
  /// after `now`, and the read buffer back to the pool (the wait reads
  /// into first_read_ only, taken here when the connection has none).
  void StartWaiting(health::Millis timeout, bool first, health::MonotonicTime now);
  /// After that read: moves its `n` bytes into a buffer from the worker's
  /// pool. @return false when the read failed (the connection ends).
  bool TakeFirstRead(boost::system::error_code ec, size_t n);
  /// After a read of `n` bytes into buffer_'s prepared space: ends the
  /// wait. @return false when the read failed (the connection ends).
  bool TakeRead(boost::system::error_code ec, size_t n);
  /// How a request left the connection.
  enum class Served {
    kKeep,    // open for the next request
    kClose,   // close it (after a TLS close_notify)
    kLinger,  // an error answered before the request was read: lingering close
  };
  /// What ReceiveRequest got: a request (`request`, to be decided under
  /// `pinned`), or none, and how the connection goes on (`served`: the
  /// request was refused or the client went while it was read).
  struct Received {
    Served served = Served::kClose;
    common::PooledPtr<Request> request;
    PinnedRuntime pinned;
    static Received None(Served how);  // no request: the connection goes on `how`
  };
  /// Reads one request whose first bytes are buffered; answers a request
  /// that cannot be read (too large, too slow, malformed) itself. Run then
  /// serves the request (HandleRequest): this frame is gone by then, and a
  /// stream does not hold it for its life.
  net::awaitable<Received> ReceiveRequest();
  /// Feeds buffered bytes to the parser (stopping after the head when
  /// `header_only`); never reads. need_more is not an error.
  boost::system::error_code ParseBuffered(RequestParser& parser, bool header_only);
  /// Reads until the head is complete, under the header deadline.
  net::awaitable<boost::system::error_code> ReadHeader(RequestParser& parser,
                                                       health::Millis header_timeout);
  /// Reads the rest of the body (answering Expect: 100-continue first),
  /// under the body deadline; beast::error::timeout when it passed.
  net::awaitable<boost::system::error_code> ReadBody(RequestParser& parser,
                                                     health::Millis body_timeout);
  net::awaitable<void> LingeringClose();
  /// Run's wait was cancelled by RequestPark: gives first_read_ back and
  /// waits for the client's next bytes with a handler that owns the
  /// session (`self`) instead of Run's frames.
  void Park(common::PooledPtr<Session> self);
  /// The parked wait (again after a wake-up that found nothing to read).
  void WaitParked(common::PooledPtr<Session> self);
  /// The parked connection became readable: reads what arrived and runs
  /// Run again, or ends the connection.
  static void Unpark(common::PooledPtr<Session> self, boost::system::error_code ec);

  Worker& worker_;
  ListenerSpec spec_;
  routing::IpAddr peer_;
  std::optional<routing::IpAddr> proxy_source_;
  // source_text()'s characters; none until its first call, which comes
  // after the PROXY header (the first request).
  uint8_t source_text_size_ = 0;
  char source_text_[routing::IpAddr::kMaxText];
  std::optional<Stream> stream_;
  SslContextPtr tls_context_;  // keeps the context alive for this connection
  ReadBuffer buffer_;
  // Where a waiting connection reads the first bytes of its next request:
  // all of a small one (a chat request with a short prompt), so the wait
  // costs 512 bytes instead of a 4 KiB buffer and no extra read. A block
  // of the block cache, taken by each wait and given back when its bytes
  // moved to buffer_ (a request in progress, a stream for minutes, does not
  // hold it) or the connection parks (it waits for readability without a
  // buffer).
  struct FirstRead {
    FirstRead() {}  // NOLINT: the bytes stay uninitialised
    char bytes[kFirstReadBytes];
  };
  common::PooledPtr<FirstRead> first_read_;
  Watchdog watchdog_;
  bool idle_ = true;
  bool closed_ = false;
  // While WaitForData waits: since when, and whether for a first request
  // (header_timeout) or a next one (idle_timeout).
  bool waiting_ = false;
  bool waiting_first_ = false;
  bool owned_ = false;  // Run owns the session (SpawnSession): it may park
  bool park_ = false;   // RequestPark cancelled Run's wait
  WatchdogClock::time_point waiting_since_{};
  std::optional<ErrorKind> refusal_;  // set: answer 503 and close
  routing::IpAddr client_ip_;         // counted in ConnectionsPerIp when counted_ip_
  bool counted_ip_ = false;
};

}  // namespace geogate::proxy
