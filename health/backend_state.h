// Live, shared state of one backend: health (written by the health thread),
// load and latency observations (written by workers), read lock-free by every
// worker on the request path. Kept in the HealthTable keyed by
// Backend::state_key(), so it survives config reloads for unchanged backends.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "health/time_source.h"

namespace geogate::health {

enum class HealthState : uint8_t {
  kUnknown = 0,    // never probed yet: takes no traffic (a new backend waits for its first probe)
  kHealthy = 1,
  kUnhealthy = 2,
};
const char* HealthStateName(HealthState s);

/// Why a probe or a request to a backend failed. Probe and passive reasons
/// share one enum so /admin/backends and metrics speak one vocabulary.
enum class FailureReason : uint8_t {
  kNone = 0,
  kConnectRefused,
  kConnectTimeout,
  kProbeTimeout,
  kBadStatus,         // probe answered non-2xx
  kTlsError,
  kReset,             // connection reset / closed before a complete response
  kUpstream5xx,       // request answered 5xx
  kFirstTokenTimeout,
  kStreamIdle,        // no body bytes for stream_idle_timeout
  kEjected,           // outlier detection took it out
  kProtocolError,     // unparseable response
  kCount,
};
const char* FailureReasonName(FailureReason r);

/// The backend's own view of its load, from its probe answer (optional).
struct LoadReport {
  int64_t at_ns = 0;  // monotonic time it was received; 0 = never
  int32_t queue_depth = -1;
  int32_t inflight = -1;
  float kv_cache_utilization = -1;  // 0..1
};

class BackendState {
 public:
  explicit BackendState(std::string key) : key_(std::move(key)) {}
  const std::string& key() const { return key_; }

  // ---- written by the health thread -------------------------------------
  std::atomic<HealthState> state{HealthState::kUnknown};
  std::atomic<FailureReason> reason{FailureReason::kNone};
  std::atomic<int64_t> since_ns{0};           // monotonic ns of the last state change
  std::atomic<int64_t> rtt_ewma_us{-1};       // probe round trip; -1 = no sample yet
  /// 0 = not ejected. Otherwise the monotonic ns at which the outlier
  /// ejection expires; it stays set after that time until a probe started at
  /// or after it succeeds (see health/outlier_detector.h), so any non-zero
  /// value means "out of rotation".
  std::atomic<int64_t> ejected_until_ns{0};
  std::atomic<uint32_t> ejections{0};         // lifetime count
  std::atomic<uint32_t> probe_failures{0};    // consecutive failed probes
  std::atomic<int64_t> load_at_ns{0};
  std::atomic<int32_t> load_queue_depth{-1};
  std::atomic<int32_t> load_inflight{-1};
  std::atomic<float> load_kv_util{-1};

  // ---- written by workers (own cache line: these move on every request) --
  alignas(64) std::atomic<uint32_t> inflight{0};
  std::atomic<uint32_t> consecutive_failures{0};  // passive, reset by a success
  std::atomic<int64_t> ttft_ewma_us{-1};          // -1 = no sample yet
  std::atomic<int64_t> ttft_at_ns{0};             // when the last TTFT sample arrived

  /// Routable = healthy now and not ejected. `now_ns` is not needed: an
  /// ejection ends only when the health thread clears ejected_until_ns after
  /// a good probe past the expiry, never by the clock alone.
  bool routable([[maybe_unused]] int64_t now_ns) const {
    return state.load(std::memory_order_relaxed) == HealthState::kHealthy && !ejected();
  }
  /// Out of rotation by outlier detection (expired-but-unconfirmed included).
  bool ejected() const { return ejected_until_ns.load(std::memory_order_relaxed) != 0; }
  LoadReport load() const {
    return {load_at_ns.load(std::memory_order_relaxed),
            load_queue_depth.load(std::memory_order_relaxed),
            load_inflight.load(std::memory_order_relaxed),
            load_kv_util.load(std::memory_order_relaxed)};
  }

 private:
  std::string key_;
};

}  // namespace geogate::health
