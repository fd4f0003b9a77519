// Time-weighted backend utilisation over 1, 5 and 15 minutes
// (docs/showback.md, "Scaling signal"). The server samples every backend's
// in-flight count about once a second; each sample stands for the time since
// the previous sample of that backend, up to `max_gap` (a sampler that
// stalled longer leaves the rest of the gap uncounted rather than guessed).
// Averages are over the covered time inside the window, so irregular
// spacing, gaps and backends that appear or leave on reload (keyed by
// Backend::state_key()) all weigh correctly. Injected time; a mutex, since the
// sampler and the admin/metrics readers may be different threads.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "config/snapshot.h"
#include "health/health_table.h"
#include "health/time_source.h"

namespace geogate::accounting {

enum class UtilWindow : uint8_t { k1m = 0, k5m = 1, k15m = 2 };
inline constexpr size_t kUtilWindows = 3;
/// "1m", "5m", "15m": the `window` label.
const char* UtilWindowName(UtilWindow w);
std::chrono::seconds UtilWindowLength(UtilWindow w);

struct UtilizationSample {
  std::string key;        // Backend::state_key()
  uint32_t inflight = 0;  // requests in flight right now
  uint32_t capacity = 1;  // configured concurrent streams at 100 %
  bool routable = false;  // healthy and not ejected: its capacity is on offer
};

/// One backend's integrals over one window.
struct BackendUsage {
  double covered_seconds = 0;   // time with samples inside the window
  double inflight_seconds = 0;  // integral of in-flight over that time
  double offered_seconds = 0;   // integral of capacity while routable
  double capacity_seconds = 0;  // integral of configured capacity
  bool has_data() const { return covered_seconds > 0; }
  double mean_inflight() const { return has_data() ? inflight_seconds / covered_seconds : 0; }
  /// In-flight / configured capacity, time-weighted.
  double utilization() const {
    return capacity_seconds > 0 ? inflight_seconds / capacity_seconds : 0;
  }
};

class UtilizationTracker {
 public:
  /// @param max_gap the longest time one sample may stand for; set it to a
  ///        few sample intervals (set_sample_interval does: 3x).
  explicit UtilizationTracker(health::Millis max_gap = health::Millis(3000)) : max_gap_(max_gap) {}

  /// Reload: [capacity] sample_interval_ms changed.
  void set_sample_interval(health::Millis interval);

  /// Records one sample per backend present now. Backends missing from
  /// `samples` get nothing; their history ages out and, 15 minutes after
  /// their last sample, they are forgotten.
  void Sample(health::MonotonicTime now, const std::vector<UtilizationSample>& samples);
  /// Convenience for the server: samples `states[i]` (the live state of
  /// `cfg.backends[i]`: in-flight count, routable) with its capacity.
  void Sample(health::MonotonicTime now, const config::Snapshot& cfg,
              const std::vector<health::BackendStatePtr>& states);

  /// The integrals of backend `key` over the window ending at `now`.
  BackendUsage Usage(const std::string& key, UtilWindow w, health::MonotonicTime now) const;

  size_t tracked() const;

 private:
  struct Segment {
    int64_t start_ns;
    int64_t end_ns;
    uint32_t inflight;
    uint32_t capacity;
    bool routable;
  };
  struct Series {
    int64_t last_ns = 0;  // time of the last sample; 0 = none
    std::deque<Segment> segments;
  };

  mutable std::mutex mu_;
  health::Millis max_gap_;
  absl::flat_hash_map<std::string, Series> series_;
};

}  // namespace geogate::accounting
