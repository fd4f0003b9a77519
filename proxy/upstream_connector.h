// The seam between a proxy call and where its upstream connections come
// from. In production the worker's UpstreamPool is the connector: idle
// keep-alive connections first, new ones (TCP, TLS) when none is left.
// A call takes a connection, uses it for one exchange, then gives it back
// (Release) or discards it (drops the pointer, which closes it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "config/snapshot.h"
#include "health/backend_state.h"
#include "health/time_source.h"
#include "proxy/stream.h"
#include "proxy/tls.h"

namespace geogate::proxy {

/// Read size towards a backend. Beast reads at most the buffer's free
/// capacity, 512 bytes for a fresh flat_buffer: a 600-byte answer then took
/// two reads from the backend and two writes to the client. As large as
/// the relay buffer (kRelayBufferBytes, worker.h): de-chunking only
/// shrinks, so a read's body bytes fit one relay buffer and leave in one
/// write, and a stream that comes in one burst (up to 16 KiB) is one read.
/// Reserved per upstream connection for its head (pages are touched only as
/// far as the bytes reach); a trickling stream gives it back (below).
inline constexpr size_t kUpstreamReadBytes = 16 * 1024;
/// What a trickling stream waits with (BasicRelayReadSize, relay_parse.h says
/// which streams trickle): a read into a buffer this small, the 16 KiB one
/// freed while the stream waits for its next token, which is most of its
/// life.
inline constexpr size_t kUpstreamTrickleReadBytes = 512;

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

/// One virtual call per step; nothing here allocates per request.
class UpstreamConnector {
 public:
  virtual ~UpstreamConnector() = default;

  /// @return a kept connection to `backend`, idle at most `idle_timeout`
  ///         at `now`, that the backend has not closed; or null.
  virtual UpstreamConnPtr TakeIdle(const config::Backend& backend, health::MonotonicTime now,
                                   health::Millis idle_timeout) = 0;
  /// Opens a new connection to `backend` (a TLS session for https ones)
  /// within `timeout`; on failure the result says why, in the failure
  /// vocabulary of health/.
  virtual net::awaitable<ConnectResult> Connect(const config::Backend& backend,
                                                const SslContextPtr& tls,
                                                health::Millis timeout) = 0;
  /// Gives back a connection whose last response was read completely, at
  /// `now`, keeping at most `max_idle` per backend.
  virtual void Release(UpstreamConnPtr conn, health::MonotonicTime now, uint32_t max_idle) = 0;
};

}  // namespace geogate::proxy
