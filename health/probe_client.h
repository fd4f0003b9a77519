// The seam between probe scheduling and probe I/O (STYLE.md point 4): a
// ProbeSession asks its ProbeClient for one probe at a time and gets one
// ProbeResult back. HttpProbeClient is the only implementation that touches
// the network; tests inject fakes through ProbeClientFactory.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "config/snapshot.h"
#include "health/backend_state.h"

namespace geogate::health {

struct ProbeResult {
  bool ok = false;
  FailureReason reason = FailureReason::kNone;  // kNone when ok
  /// Request time on an established connection; a probe that had to connect
  /// (or reconnect) reports the total, connect and TLS handshake included.
  std::chrono::microseconds rtt{0};
  int status = 0;  // HTTP status, 0 when none was received
  /// The backend's own load, when it reported one (at_ns is left 0: the
  /// caller stamps it with its own clock).
  std::optional<LoadReport> load;

  static ProbeResult Ok(std::chrono::microseconds rtt, int status = 200) {
    return {true, FailureReason::kNone, rtt, status, std::nullopt};
  }
  static ProbeResult Failed(FailureReason reason, int status = 0) {
    return {false, reason, std::chrono::microseconds(0), status, std::nullopt};
  }
};

class ProbeClient {
 public:
  using Callback = std::function<void(const ProbeResult&)>;
  virtual ~ProbeClient() = default;

  /// Starts one probe. `cb` runs exactly once, on the health thread, unless
  /// cancel() or close() is called (or the client destroyed) first; then it
  /// never runs. It may run before probe() returns. One probe at a time:
  /// starting a probe while one is in flight abandons the first.
  virtual void probe(Callback cb) = 0;
  /// Abandons the probe in flight and closes the connection (after a timeout
  /// its state is unknown). The next probe reconnects.
  virtual void cancel() = 0;
  /// Closes the keep-alive connection, abandoning any probe in flight.
  virtual void close() = 0;
  /// @return the reason to report if the caller's timeout fires now:
  ///         kConnectTimeout while connecting, kProbeTimeout otherwise.
  virtual FailureReason TimeoutReason() const { return FailureReason::kProbeTimeout; }
};
using ProbeClientPtr = std::unique_ptr<ProbeClient>;

class ProbeClientFactory {
 public:
  virtual ~ProbeClientFactory() = default;
  /// @return a client probing `backend` with the `health` settings (path,
  ///         timeout, load_report). Called on the health thread.
  virtual ProbeClientPtr create(const config::Backend& backend, const config::Health& health) = 0;
};

}  // namespace geogate::health
