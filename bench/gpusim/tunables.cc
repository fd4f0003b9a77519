#include "bench/gpusim/tunables.h"

#include <array>
#include <utility>

namespace gpusim {
namespace {

constexpr std::array<std::pair<Mode, std::string_view>, 6> kModeNames{{
    {Mode::kHealthy, "healthy"},
    {Mode::kRefuse, "refuse"},
    {Mode::kError500, "error500"},
    {Mode::kStall, "stall"},
    {Mode::kDieAfter, "die_after"},
    {Mode::kSlow, "slow"},
}};

}  // namespace

std::string_view mode_name(Mode mode) {
  for (const auto& [m, name] : kModeNames) {
    if (m == mode) return name;
  }
  return "unknown";
}

std::optional<Mode> parse_mode(std::string_view name) {
  for (const auto& [m, n] : kModeNames) {
    if (n == name) return m;
  }
  return std::nullopt;
}

std::pair<Tunables, Tunables> TunablesStore::apply(const TunablesUpdate& update) {
  std::lock_guard lock(mu_);
  const Tunables previous = current_;
  if (update.mode) current_.mode = *update.mode;
  if (update.n) current_.die_after_n = *update.n;
  if (update.factor) current_.slow_factor = *update.factor;
  if (update.rtt_ms) current_.rtt_ms = *update.rtt_ms;
  if (update.ttft_ms) current_.ttft_ms = *update.ttft_ms;
  if (update.token_interval_ms) current_.token_interval_ms = *update.token_interval_ms;
  // n first, then the mode: a reader that sees die_after sees its n.
  die_after_n_.store(current_.die_after_n, std::memory_order_release);
  mode_.store(current_.mode, std::memory_order_release);
  return {previous, current_};
}

}  // namespace gpusim
