// Live, shared state of one backend: health (written by the health thread),
// load and latency observations (written by workers), read lock-free by every
// worker on the request path. Kept in the HealthTable keyed by
// Backend::state_key(), so it survives config reloads for unchanged backends.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "health/time_source.h"

namespace geogate::health {

enum class HealthState : uint8_t {
  kUnknown = 0,  // never probed yet: takes no traffic (a new backend waits for its first probe)
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
  kBadStatus,  // probe answered non-2xx
  kTlsError,
  kReset,        // connection reset / closed before a complete response
  kUpstream5xx,  // request answered 5xx
  kFirstTokenTimeout,
  kStreamIdle,     // no body bytes for stream_idle_timeout
  kEjected,        // outlier detection took it out
  kProtocolError,  // unparseable response
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

/// A process-stable, non-zero key for a canonical model name: what a
/// backend's per-model TTFT slots are keyed by, so they survive reloads
/// that reorder models.
uint64_t ModelKey(std::string_view canonical_name);

/// The observed time to first token of one model on one backend. Streams
/// only: a non-streaming answer's first byte comes after the whole
/// generation, which says nothing about how soon a stream would start.
struct ModelTtft {
  std::atomic<uint64_t> key{0};      // ModelKey; 0 = free slot
  std::atomic<int64_t> ewma_us{-1};  // -1 = no sample yet
  std::atomic<int64_t> at_ns{0};     // when the last sample arrived
};

class BackendState {
 public:
  /// Per-model TTFT slots per backend; a backend serving more models than
  /// this falls back to its backend-wide estimate for the rest.
  static constexpr size_t kModelSlots = 8;

  explicit BackendState(std::string key) : key_(std::move(key)) {}
  const std::string& key() const { return key_; }

  // ---- written by the health thread -------------------------------------
  std::atomic<HealthState> state{HealthState::kUnknown};
  std::atomic<FailureReason> reason{FailureReason::kNone};
  std::atomic<int64_t> since_ns{0};      // monotonic ns of the last state change
  std::atomic<int64_t> rtt_ewma_us{-1};  // probe round trip; -1 = no sample yet
  /// 0 = not ejected. Otherwise the monotonic ns at which the outlier
  /// ejection expires; it stays set after that time until a probe started at
  /// or after it succeeds (see health/outlier_detector.h), so any non-zero
  /// value means "out of rotation".
  std::atomic<int64_t> ejected_until_ns{0};
  std::atomic<uint32_t> ejections{0};       // lifetime count
  std::atomic<uint32_t> probe_failures{0};  // consecutive failed probes
  std::atomic<int64_t> load_at_ns{0};
  std::atomic<int32_t> load_queue_depth{-1};
  std::atomic<int32_t> load_inflight{-1};
  std::atomic<float> load_kv_util{-1};

  // ---- written by workers (own cache line: these move on every request) --
  alignas(64) std::atomic<uint32_t> inflight{0};
  std::atomic<uint32_t> consecutive_failures{0};  // passive, reset by a success
  // Backend-wide TTFT of streams of every model: /admin/backends, metrics,
  // and selection for a model without a slot of its own.
  std::atomic<int64_t> ttft_ewma_us{-1};  // -1 = no sample yet
  std::atomic<int64_t> ttft_at_ns{0};     // when the last TTFT sample arrived
  std::array<ModelTtft, kModelSlots> model_ttft;

  /// The slot of `key`, claiming a free one. Null when every slot belongs
  /// to another model.
  ModelTtft* ClaimModelSlot(uint64_t key);
  /// The slot of `key`, or null: none yet (`*all_taken` says whether one
  /// could still be claimed).
  const ModelTtft* FindModelSlot(uint64_t key, bool* all_taken = nullptr) const;
  /// Forgets every TTFT sample (a backend back from an outage starts over
  /// from its probe RTT). Slots keep their models.
  void ResetTtft();

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
