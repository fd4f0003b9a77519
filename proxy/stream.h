// A byte stream that is either plain TCP or TLS over TCP, decided per
// connection. The HTTP code is written once against this type instead of
// being instantiated for every (client, backend) x (plain, TLS) pair, which
// keeps compile times and code size down; the cost is one predictable branch
// per I/O call.
//
// A build of the proxy sources for tests (GEOGATE_TEST_TRANSPORT, the
// geogate_proxy_test_transport library) adds a third kind: Beast's test
// stream, an in-memory pipe, so the proxy call runs without sockets. The
// gateway is built without it: no test double ships, and production's
// branches are the two above.
#pragma once

#ifdef GEOGATE_TRANSPORT_NEUTRAL
#error \
    "proxy/stream.h in a source built once for both transports: move it to GEOGATE_PROXY_TRANSPORT_SOURCES (proxy/CMakeLists.txt)"
#endif

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#ifdef GEOGATE_TEST_TRANSPORT
#include <boost/assert.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#endif

namespace geogate::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace ssl = boost::asio::ssl;

// The TCP layer is Asio's socket itself, not a Beast tcp_stream: every
// deadline is the Watchdog's (proxy/watchdog.h), so the tcp_stream's
// timers were never armed, yet cost each connection a shared state of
// about 0.5 KiB and each read and write a layer of handlers.
class Stream {
 public:
  using Socket = net::ip::tcp::socket;
  using executor_type = Socket::executor_type;
  using TlsStream = beast::ssl_stream<Socket>;

  explicit Stream(Socket&& tcp) : plain_(std::move(tcp)) {}
  Stream(Socket&& tcp, ssl::context& ctx) : tls_(std::in_place, std::move(tcp), ctx) {}
#ifdef GEOGATE_TEST_TRANSPORT
  /// The test kind: `s` is one end of a beast::test::stream pair.
  explicit Stream(beast::test::stream&& s) : test_(std::in_place, std::move(s)) {}
#endif
  Stream(Stream&&) = default;
  Stream& operator=(Stream&&) = default;

  bool is_tls() const {
    return tls_.has_value();
  }
  executor_type get_executor() {
#ifdef GEOGATE_TEST_TRANSPORT
    if (test_) return test_->get_executor();
#endif
    return lowest().get_executor();
  }

  /// The TCP socket (for socket options, connecting, TLS set-up). Not for
  /// the test kind: only a session's own set-up (PROXY header, TLS,
  /// lingering close), which tests over it do not run, reaches it.
  Socket& lowest() {
#ifdef GEOGATE_TEST_TRANSPORT
    BOOST_ASSERT(!test_);
#endif
    return tls_ ? tls_->next_layer() : *plain_;
  }
  TlsStream& tls() {
    return *tls_;
  }

  /// Closes the connection: a pending operation ends with an error (what
  /// the Watchdog and a client's disconnect do to a stream).
  void close() {
#ifdef GEOGATE_TEST_TRANSPORT
    if (test_) return test_->close();
#endif
    lowest().close();
  }
  /// Ends every pending operation with an error but leaves the connection
  /// open, so an answer can still be written (a deadline that sends 408).
  /// The test kind closes its input instead: pending and later reads see
  /// EOF, writes still go out.
  void interrupt() {
#ifdef GEOGATE_TEST_TRANSPORT
    if (test_) return test_->close_remote();
#endif
    boost::system::error_code ec;
    lowest().cancel(ec);
  }
  /// Sends a FIN: no more bytes from this side (TLS: the caller sends
  /// close_notify first). The test kind closes.
  /// Cancels what is pending on a plain TCP connection: a waiting
  /// connection's read completes with operation_aborted, having read
  /// nothing. @return false, and nothing cancelled, for TLS (its read may
  /// hold part of a record) and in-memory streams.
  bool cancel_plain() {
#ifdef GEOGATE_TEST_TRANSPORT
    if (test_) return false;
#endif
    if (tls_) return false;
    boost::system::error_code ec;
    plain_->cancel(ec);
    return !ec;
  }
  void shutdown_send() {
#ifdef GEOGATE_TEST_TRANSPORT
    if (test_) return test_->close();
#endif
    boost::system::error_code ec;
    lowest().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  }

  /// One read from the TCP socket under any TLS: a PROXY header before the
  /// handshake, or what a closing connection still sends. The test kind
  /// reads its stream.
  template <class MutableBufferSequence, class ReadToken>
  auto async_read_tcp(const MutableBufferSequence& buffers, ReadToken&& token) {
    return net::async_initiate<ReadToken, void(boost::system::error_code, size_t)>(
        [this](auto handler, const MutableBufferSequence& b) {
#ifdef GEOGATE_TEST_TRANSPORT
          if (test_) return test_->async_read_some(b, std::move(handler));
#endif
          lowest().async_read_some(b, std::move(handler));
        },
        token, buffers);
  }

  /// Waits for the peer to send or close without consuming a byte: a
  /// MSG_PEEK receive of one byte into `byte` on the TCP socket (for TLS,
  /// the record bytes under it). The handler gets (error_code, size_t).
  /// The test kind cannot peek: it reads the byte, which is lost. Tests
  /// over it send nothing while a request is with the backend.
  template <class Handler>
  void async_peek_byte(char* byte, Handler&& handler) {
#ifdef GEOGATE_TEST_TRANSPORT
    if (test_) return test_->async_read_some(net::buffer(byte, 1), std::forward<Handler>(handler));
#endif
    lowest().async_receive(net::buffer(byte, 1), net::socket_base::message_peek,
                           std::forward<Handler>(handler));
  }
  /// Cancels a pending async_peek_byte (and any other pending operation).
  /// The test kind has no cancel: its pending read stays until it is closed.
  void cancel() {
#ifdef GEOGATE_TEST_TRANSPORT
    if (test_) return;
#endif
    boost::system::error_code ec;
    lowest().cancel(ec);
  }

  /// Sends what a plain TCP socket takes at once (non-blocking sendmsg) and
  /// returns the bytes sent: 0 for TLS, a full socket buffer or an error,
  /// which the asynchronous write that follows then meets. An async_write
  /// that completes at once still resumes its coroutine only after a pass
  /// of the worker's ready queue; under load, that pass is what delays a
  /// new request's first token and costs a handler per relayed chunk.
  /// The A/B of bench/ab builds it once with GEOGATE_AB_NO_TRY_SEND: it
  /// then sends nothing and every write is asynchronous.
  size_t TrySendNow(std::span<const net::const_buffer> buffers) {
#ifdef GEOGATE_AB_NO_TRY_SEND
    (void)buffers;
    return 0;
#endif
    if (tls_) return 0;
#ifdef GEOGATE_TEST_TRANSPORT
    if (test_) return 0;  // the asynchronous write does it all
#endif
    std::array<iovec, 8> iov;
    size_t n = 0;
    for (const net::const_buffer& b : buffers) {
      if (n == iov.size()) break;
      iov[n++] = iovec{const_cast<void*>(b.data()), b.size()};
    }
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = n;
    ssize_t sent = ::sendmsg(plain_->native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    return sent > 0 ? static_cast<size_t>(sent) : 0;
  }

  /// Reads what a plain TCP socket holds now (a non-blocking recv) into
  /// `into`: the bytes read, or an error (would_block when it holds
  /// nothing, eof when the peer closed). TLS and in-memory streams:
  /// operation_not_supported.
  size_t TryReadNow(net::mutable_buffer into, boost::system::error_code& ec) {
    ec = {};
#ifdef GEOGATE_TEST_TRANSPORT
    if (test_) {
      ec = net::error::operation_not_supported;
      return 0;
    }
#endif
    if (tls_) {
      ec = net::error::operation_not_supported;
      return 0;
    }
    ssize_t n = ::recv(plain_->native_handle(), into.data(), into.size(), MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0)
      ec = net::error::eof;
    else if (errno == EAGAIN || errno == EWOULDBLOCK)
      ec = net::error::would_block;
    else
      ec.assign(errno, boost::system::system_category());
    return 0;
  }

  /// One read or write of the connection (TLS: through the TLS stream),
  /// for any completion token: the kind is chosen when the operation
  /// starts, so a deferred operation (common::kAwait) has one type whatever
  /// the kind.
  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    return net::async_initiate<ReadToken, void(boost::system::error_code, size_t)>(
        [this](auto handler, const MutableBufferSequence& b) {
#ifdef GEOGATE_TEST_TRANSPORT
          if (test_) return test_->async_read_some(b, std::move(handler));
#endif
          if (tls_) return tls_->async_read_some(b, std::move(handler));
          plain_->async_read_some(b, std::move(handler));
        },
        token, buffers);
  }

  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    return net::async_initiate<WriteToken, void(boost::system::error_code, size_t)>(
        [this](auto handler, const ConstBufferSequence& b) {
#ifdef GEOGATE_TEST_TRANSPORT
          if (test_) return test_->async_write_some(b, std::move(handler));
#endif
          if (tls_) return tls_->async_write_some(b, std::move(handler));
          plain_->async_write_some(b, std::move(handler));
        },
        token, buffers);
  }

 private:
  std::optional<Socket> plain_;
  std::optional<TlsStream> tls_;
#ifdef GEOGATE_TEST_TRANSPORT
  std::optional<beast::test::stream> test_;
#endif
};

}  // namespace geogate::proxy
