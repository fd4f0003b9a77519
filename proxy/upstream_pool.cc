#include "proxy/upstream_pool.h"

#include <sys/socket.h>

#include <cerrno>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core/error.hpp>

#include "absl/strings/string_view.h"
#include "common/await.h"
#include "proxy/watchdog.h"

namespace geogate::proxy {

using health::FailureReason;
using net::ip::tcp;

namespace {

// A pooled connection is reusable when reading from it would block: no EOF
// from the backend and no unsolicited bytes.
constexpr health::Millis kCheckIdleAfter{1000};

bool LooksAlive(UpstreamConn& c) {
  int fd = c.stream.lowest().native_handle();
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

FailureReason ClassifyConnectError(const boost::system::error_code& ec) {
  if (ec == beast::error::timeout) return FailureReason::kConnectTimeout;
  if (ec.category() == net::error::get_ssl_category() || ec == net::ssl::error::stream_truncated)
    return FailureReason::kTlsError;
  // Refused, unreachable host or network: nothing is listening there now,
  // which is as definitive as a refusal.
  if (ec == net::error::connection_refused || ec == net::error::host_unreachable ||
      ec == net::error::network_unreachable || ec == net::error::connection_reset)
    return FailureReason::kConnectRefused;
  return FailureReason::kConnectTimeout;
}

UpstreamPool::~UpstreamPool() {
  Clear();
}

UpstreamConnPtr UpstreamPool::TakeIdle(const config::Backend& backend, health::MonotonicTime now,
                                       health::Millis idle_timeout) {
  key_scratch_.clear();
  backend.AppendStateKey(key_scratch_);
  return TakeIdle(std::string_view(key_scratch_), now, idle_timeout);
}

UpstreamConnPtr UpstreamPool::TakeIdle(std::string_view key, health::MonotonicTime now,
                                       health::Millis idle_timeout) {
  // absl::string_view: this abseil build does not alias std::string_view.
  auto it = idle_.find(absl::string_view(key.data(), key.size()));
  if (it == idle_.end()) return nullptr;
  auto& list = it->second;
  while (!list.empty()) {
    UpstreamConnPtr c = std::move(list.back());
    list.pop_back();
    health::Millis idle = std::chrono::duration_cast<health::Millis>(now - c->idle_since);
    if (idle > idle_timeout) continue;  // closed on drop
    // A connection idle for a moment is used without a liveness syscall:
    // backends close idle connections after seconds, not milliseconds, and
    // a reused connection found closed is retried on a fresh one anyway
    // (ProxyCall::Attempt, IsStaleConnectionError).
    if (idle >= kCheckIdleAfter && !LooksAlive(*c)) continue;
    return c;
  }
  return nullptr;
}

void UpstreamPool::Release(UpstreamConnPtr conn, health::MonotonicTime now, uint32_t max_idle) {
  if (!conn || max_idle == 0) return;
  // Bytes the backend sent past the end of its response answer nothing the
  // gateway asked, and would be parsed as the answer to the next request
  // on the connection: such a connection is closed, not kept.
  if (conn->buffer.size() != 0) return;
  conn->idle_since = now;
  auto& list = idle_[conn->key];
  if (list.size() >= max_idle) list.erase(list.begin());  // drop the oldest
  list.push_back(std::move(conn));
}

void UpstreamPool::Sweep(health::MonotonicTime now, const config::Snapshot& cfg) {
  const health::Millis idle_timeout = cfg.gateway.upstream.pool_idle_timeout;
  // Each backend's limit by its state key (name, then its URL): a backend
  // a reload removed (or moved to another URL) keeps nothing.
  absl::flat_hash_map<std::string_view, const config::Backend*> by_name;
  if (!idle_.empty()) {
    by_name.reserve(cfg.backends.size());
    for (const config::Backend& b : cfg.backends)
      by_name.emplace(b.name, &b);
  }
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto& list = it->second;
    std::erase_if(list,
                  [&](const UpstreamConnPtr& c) { return now - c->idle_since > idle_timeout; });
    std::string_view key = it->first;
    size_t cut = key.find('\n');
    auto b = by_name.find(key.substr(0, cut));
    size_t max_idle = 0;
    if (cut != std::string_view::npos && b != by_name.end() &&
        b->second->url == key.substr(cut + 1))
      max_idle = cfg.gateway.upstream.pool_max_idle.value_or(b->second->capacity);
    if (list.size() > max_idle)  // the oldest first, as Release drops them
      list.erase(list.begin(), list.begin() + static_cast<ptrdiff_t>(list.size() - max_idle));
    if (list.empty())
      idle_.erase(it++);
    else
      ++it;
  }
  resolver_.Sweep();
}

void UpstreamPool::Clear() {
  idle_.clear();
}

size_t UpstreamPool::idle_count() const {
  size_t n = 0;
  for (const auto& [k, v] : idle_)
    n += v.size();
  return n;
}

net::awaitable<ConnectResult> UpstreamPool::Connect(const config::Backend& backend,
                                                    const SslContextPtr& tls,
                                                    health::Millis timeout) {
  ConnectResult result;
  // One deadline covers the name lookup, the connect and the TLS
  // handshake. From the connect on it is the Watchdog's, like every later
  // wait on this connection, so it runs on the worker's timers (simulated
  // time in tests), not on the socket's expiry.
  health::MonotonicTime deadline = time_.monotonic() + timeout;
  auto [rec, endpoints] = co_await resolver_.Resolve(backend.host, backend.port, deadline);
  if (rec) {
    bool late = rec == net::error::timed_out;
    result.failure = late ? FailureReason::kConnectTimeout : FailureReason::kConnectRefused;
    result.error = late ? "resolving " + backend.host + " took longer than connect_timeout_ms"
                        : "cannot resolve " + backend.host + ": " + rec.message();
    co_return result;
  }
  boost::system::error_code ec;
  auto conn = backend.tls ? std::make_unique<UpstreamConn>(Stream(Stream::Socket(ioc_), *tls))
                          : std::make_unique<UpstreamConn>(Stream(Stream::Socket(ioc_)));
  conn->key = backend.state_key();
  Watchdog watchdog(timers_, time_);
  watchdog.Guard(&conn->stream, deadline);
  auto [cec, ep] = co_await net::async_connect(conn->stream.lowest(), endpoints, common::kAwait);
  if (cec && watchdog.expired()) cec = beast::error::timeout;
  if (cec) {
    result.failure = ClassifyConnectError(cec);
    result.error =
        "connect to " + backend.host + ":" + std::to_string(backend.port) + ": " + cec.message();
    co_return result;
  }
  conn->stream.lowest().set_option(tcp::no_delay(true), ec);
  if (!backend.tls) {
    result.conn = std::move(conn);
    co_return result;
  }
  auto& ssl_stream = conn->stream.tls();
  boost::system::error_code addr_ec;
  net::ip::make_address(backend.host, addr_ec);
  if (addr_ec)  // SNI only for names, never for IP literals (RFC 6066 §3)
    SSL_set_tlsext_host_name(ssl_stream.native_handle(), backend.host.c_str());
  if (backend.tls_verify)
    ssl_stream.set_verify_callback(net::ssl::host_name_verification(backend.host));
  auto [hec] =
      co_await ssl_stream.async_handshake(net::ssl::stream_base::client, common::kAwaitInFrame);
  if (hec && watchdog.expired()) hec = beast::error::timeout;
  if (hec) {
    result.failure =
        hec == beast::error::timeout ? FailureReason::kConnectTimeout : FailureReason::kTlsError;
    result.error = "TLS handshake with " + backend.host + ": " + hec.message();
    co_return result;
  }
  result.conn = std::move(conn);
  co_return result;
}

}  // namespace geogate::proxy
