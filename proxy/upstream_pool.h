// Per-worker keep-alive connections to backends. Only the owning worker's
// thread touches a pool, so there is no locking. Connections are keyed by
// Backend::state_key(), reused most-recently-used first (so idle ones age
// out), checked for a peer close before reuse, and closed when idle longer
// than gateway.upstream.pool_idle_timeout_ms.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "absl/container/flat_hash_map.h"
#include "config/snapshot.h"
#include "health/backend_state.h"
#include "health/time_source.h"
#include "proxy/stream.h"
#include "proxy/tls.h"

namespace geogate::gateway {

/// Read size towards a backend. Beast reads at most the buffer's free
/// capacity, 512 bytes for a fresh flat_buffer: a 600-byte answer then took
/// two reads from the backend and two writes to the client.
inline constexpr size_t kUpstreamReadBytes = 8 * 1024;

struct UpstreamConn {
  explicit UpstreamConn(Stream&& s) : stream(std::move(s)) { buffer.reserve(kUpstreamReadBytes); }
  Stream stream;
  beast::flat_buffer buffer;  // bytes read past the last response (normally none)
  std::string key;
  health::MonotonicTime idle_since{};
  uint32_t uses = 0;
};
using UpstreamConnPtr = std::unique_ptr<UpstreamConn>;

struct ConnectResult {
  UpstreamConnPtr conn;  // null on failure
  health::FailureReason failure = health::FailureReason::kNone;
  std::string error;
};

/// Maps a connect/handshake error to the failure vocabulary.
health::FailureReason ClassifyConnectError(const boost::system::error_code& ec);

class UpstreamPool {
 public:
  UpstreamPool(net::io_context& ioc, const health::TimeSource& time) : ioc_(ioc), time_(time) {}
  ~UpstreamPool();

  /// An idle connection to `backend` (by its state key, built in a buffer
  /// the pool keeps rather than a new string per request) that the backend
  /// has not closed, or null.
  UpstreamConnPtr TakeIdle(const config::Backend& backend, health::MonotonicTime now,
                           health::Millis idle_timeout);
  /// Returns a connection whose last response was read completely; one
  /// with bytes buffered past that response is closed instead.
  void Release(UpstreamConnPtr conn, health::MonotonicTime now, uint32_t max_idle);
  /// Opens a new connection (and TLS session for https backends) within
  /// `timeout`. Sets TCP_NODELAY.
  net::awaitable<ConnectResult> Connect(const config::Backend& backend, const SslContextPtr& tls,
                                        health::Millis timeout);
  /// Closes idle connections older than `idle_timeout`.
  void Sweep(health::MonotonicTime now, health::Millis idle_timeout);
  void Clear();
  size_t idle_count() const;

 private:
  UpstreamConnPtr TakeIdle(std::string_view key, health::MonotonicTime now,
                           health::Millis idle_timeout);
  net::awaitable<std::vector<net::ip::tcp::endpoint>> Resolve(const config::Backend& backend,
                                                              boost::system::error_code& ec);
  net::io_context& ioc_;
  const health::TimeSource& time_;  // the DNS cache's age
  absl::flat_hash_map<std::string, std::vector<UpstreamConnPtr>> idle_;
  std::string key_scratch_;
  struct Resolved {
    std::vector<net::ip::tcp::endpoint> endpoints;
    health::MonotonicTime at{};
  };
  absl::flat_hash_map<std::string, Resolved> dns_;
};

}  // namespace geogate::gateway
