// The failure mode and the delays that the control listener can change at
// run time, shared by every worker.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace gpusim {

enum class Mode : uint8_t { kHealthy, kRefuse, kError500, kStall, kDieAfter, kSlow };

std::string_view mode_name(Mode mode);
std::optional<Mode> parse_mode(std::string_view name);

/// One consistent set of run-time settings. A request copies it once when it
/// starts, so a change applies to new requests at once and never tears one.
struct Tunables {
  Mode mode = Mode::kHealthy;
  int64_t die_after_n = 0;   // die_after: tokens sent before the reset
  double slow_factor = 1.0;  // slow: multiplies ttft and token interval
  double rtt_ms = 0;
  double ttft_ms = 20;
  double token_interval_ms = 10;

  /// TTFT and token interval with the slow factor applied.
  double effective_ttft_ms() const { return mode == Mode::kSlow ? ttft_ms * slow_factor : ttft_ms; }
  double effective_interval_ms() const {
    return mode == Mode::kSlow ? token_interval_ms * slow_factor : token_interval_ms;
  }
};

/// A partial update, as posted to `POST /control`.
struct TunablesUpdate {
  std::optional<Mode> mode;
  std::optional<int64_t> n;
  std::optional<double> factor;
  std::optional<double> rtt_ms;
  std::optional<double> ttft_ms;
  std::optional<double> token_interval_ms;
};

/// Thread-safe holder of the current Tunables. The mode is mirrored in an
/// atomic so the per-token checks (stall, die_after) cost one relaxed load.
class TunablesStore {
 public:
  explicit TunablesStore(const Tunables& initial)
      : current_(initial), mode_(initial.mode), die_after_n_(initial.die_after_n) {}

  Tunables snapshot() const {
    std::lock_guard lock(mu_);
    return current_;
  }
  Mode mode() const { return mode_.load(std::memory_order_acquire); }
  int64_t die_after_n() const { return die_after_n_.load(std::memory_order_acquire); }

  /// Applies `update` and returns {previous, current}.
  std::pair<Tunables, Tunables> apply(const TunablesUpdate& update);

 private:
  mutable std::mutex mu_;
  Tunables current_;
  std::atomic<Mode> mode_;
  std::atomic<int64_t> die_after_n_;
};

}  // namespace gpusim
