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
#include "proxy/upstream_connector.h"
#include "proxy/upstream_resolver.h"

namespace geogate::proxy {

/// Maps a connect/handshake error to the failure vocabulary.
health::FailureReason ClassifyConnectError(const boost::system::error_code& ec);

class UpstreamPool final : public UpstreamConnector {
 public:
  /// @param timers where connect deadlines come from (the worker's).
  UpstreamPool(net::io_context& ioc, const health::TimeSource& time, health::TimerFactory& timers)
      : ioc_(ioc), time_(time), timers_(timers), resolver_(ioc.get_executor(), time, timers) {}
  ~UpstreamPool() override;

  // UpstreamConnector
  /// Finds the connection by the backend's state key, built in a buffer the
  /// pool keeps rather than a new string per request.
  UpstreamConnPtr TakeIdle(const config::Backend& backend, health::MonotonicTime now,
                           health::Millis idle_timeout) override;
  /// A connection with bytes buffered past its last response is closed
  /// instead of kept.
  void Release(UpstreamConnPtr conn, health::MonotonicTime now, uint32_t max_idle) override;
  /// Sets TCP_NODELAY. Resolving a host name, the connect and the TLS
  /// handshake share one deadline (`timeout` from now).
  net::awaitable<ConnectResult> Connect(const config::Backend& backend, const SslContextPtr& tls,
                                        health::Millis timeout) override;

  /// Applies `cfg` (the worker's current config) to the idle connections:
  /// closes those idle longer than its pool_idle_timeout_ms, those to
  /// backends it no longer has, and the oldest beyond each backend's
  /// pool_max_idle (a reload may have lowered it); forgets old DNS answers.
  void Sweep(health::MonotonicTime now, const config::Snapshot& cfg);
  void Clear();
  /// Before the io_context goes: host-name lookups still running are
  /// abandoned (they post nothing back).
  void Abandon() { resolver_.Abandon(); }
  size_t idle_count() const;

 private:
  UpstreamConnPtr TakeIdle(std::string_view key, health::MonotonicTime now,
                           health::Millis idle_timeout);
  net::io_context& ioc_;
  const health::TimeSource& time_;  // connect deadlines
  health::TimerFactory& timers_;
  absl::flat_hash_map<std::string, std::vector<UpstreamConnPtr>> idle_;
  std::string key_scratch_;
  UpstreamResolver resolver_;
};

}  // namespace geogate::proxy
