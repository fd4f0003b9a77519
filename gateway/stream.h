// A byte stream that is either plain TCP or TLS over TCP, decided per
// connection. The HTTP code is written once against this type instead of
// being instantiated for every (client, backend) x (plain, TLS) pair, which
// keeps compile times and code size down; the cost is one predictable branch
// per I/O call.
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace geogate::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace ssl = boost::asio::ssl;

class Stream {
 public:
  using executor_type = beast::tcp_stream::executor_type;
  using TlsStream = beast::ssl_stream<beast::tcp_stream>;

  explicit Stream(beast::tcp_stream&& tcp) : plain_(std::move(tcp)) {}
  Stream(beast::tcp_stream&& tcp, ssl::context& ctx) : tls_(std::in_place, std::move(tcp), ctx) {}
  Stream(Stream&&) = default;
  Stream& operator=(Stream&&) = default;

  bool is_tls() const { return tls_.has_value(); }
  executor_type get_executor() { return lowest().get_executor(); }

  /// The TCP layer (for timeouts, socket options, close).
  beast::tcp_stream& lowest() { return tls_ ? tls_->next_layer() : *plain_; }
  TlsStream& tls() { return *tls_; }

  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<ReadToken>(token));
    return plain_->async_read_some(buffers, std::forward<ReadToken>(token));
  }

  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    if (tls_) return tls_->async_write_some(buffers, std::forward<WriteToken>(token));
    return plain_->async_write_some(buffers, std::forward<WriteToken>(token));
  }

 private:
  std::optional<beast::tcp_stream> plain_;
  std::optional<TlsStream> tls_;
};

}  // namespace geogate::gateway
