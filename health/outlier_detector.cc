#include "health/outlier_detector.h"

#include <algorithm>

namespace geogate::health {
namespace {

bool Ejected(const BackendState& s) {
  return s.ejected_until_ns.load(std::memory_order_relaxed) != 0;
}

int64_t Nanos(Millis d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

}  // namespace

const char* OutlierVerdictName(OutlierDetector::Verdict v) {
  switch (v) {
    case OutlierDetector::Verdict::kIgnored:
      return "ignored";
    case OutlierDetector::Verdict::kCounted:
      return "counted";
    case OutlierDetector::Verdict::kCapped:
      return "capped";
    case OutlierDetector::Verdict::kEjected:
      return "ejected";
    case OutlierDetector::Verdict::kMarkedUnhealthy:
      return "marked_unhealthy";
  }
  return "unknown";
}

OutlierDetector::OutlierDetector(const TimeSource& time, Hooks hooks)
    : time_(time), hooks_(std::move(hooks)) {}

void OutlierDetector::update(const config::Snapshot& snapshot,
                             const std::vector<BackendStatePtr>& states) {
  settings_ = snapshot.health;
  absl::flat_hash_map<const BackendState*, Entry> next;
  const size_t n = std::min(snapshot.backends.size(), states.size());
  for (size_t i = 0; i < n; ++i) {
    if (!states[i]) continue;
    Entry entry;
    if (auto it = entries_.find(states[i].get()); it != entries_.end()) entry = it->second;
    entry.state = states[i];
    entry.name = snapshot.backends[i].name;
    entry.region = snapshot.backends[i].region_index;
    entry.models = snapshot.backends[i].models;
    next[states[i].get()] = std::move(entry);
  }
  entries_ = std::move(next);
}

OutlierDetector::Verdict OutlierDetector::ReportFailure(BackendState& state, FailureReason reason) {
  auto it = entries_.find(&state);
  if (it == entries_.end()) return Verdict::kIgnored;  // removed by a reload meanwhile
  if (reason == FailureReason::kNone || reason == FailureReason::kEjected ||
      reason == FailureReason::kCount)
    return Verdict::kIgnored;

  if (reason == FailureReason::kConnectRefused) {
    // Nothing listens: no point counting to N while requests keep failing.
    state.consecutive_failures.store(0, std::memory_order_relaxed);
    if (hooks_.mark_unhealthy) hooks_.mark_unhealthy(state, reason);
    return Verdict::kMarkedUnhealthy;
  }

  // Reports about a backend already out of rotation come from requests that
  // started before it left; they say nothing new.
  if (state.state.load(std::memory_order_relaxed) != HealthState::kHealthy || Ejected(state))
    return Verdict::kIgnored;
  const uint32_t failures = state.consecutive_failures.fetch_add(1, std::memory_order_relaxed) + 1;
  if (settings_.outlier_consecutive_failures == 0 ||
      failures < settings_.outlier_consecutive_failures)
    return Verdict::kCounted;

  if (!UnderPoolCap(it->second)) return Verdict::kCapped;
  eject(it->second, reason, ToNanos(time_.monotonic()));
  return Verdict::kEjected;
}

bool OutlierDetector::UnderPoolCap(const Entry& entry) const {
  const uint64_t percent = std::min<uint32_t>(settings_.max_ejection_percent, 100);
  // After this ejection, at most `percent` of each of its pools may be out.
  auto fits = [&](const std::string* model) {
    size_t pool = 0;
    size_t ejected = 0;
    for (const auto& [ptr, other] : entries_) {
      if (other.region != entry.region) continue;
      if (model != nullptr &&
          std::find(other.models.begin(), other.models.end(), *model) == other.models.end())
        continue;
      ++pool;
      if (Ejected(*ptr)) ++ejected;
    }
    return (ejected + 1) * 100 <= pool * percent;
  };
  if (entry.models.empty()) return fits(nullptr);
  for (const std::string& model : entry.models)
    if (!fits(&model)) return false;
  return true;
}

void OutlierDetector::eject(Entry& entry, FailureReason cause, int64_t now_ns) {
  BackendState& s = *entry.state;
  const int64_t base = std::max<int64_t>(0, Nanos(settings_.outlier_base_ejection));
  const int64_t max = std::max<int64_t>(base, Nanos(settings_.outlier_max_ejection));
  // A backend that behaved for a full max_ejection since its last return
  // starts a new streak; a flapping one keeps backing off.
  if (entry.returned_at_ns != 0 && now_ns - entry.returned_at_ns >= max) entry.streak = 0;
  // Stop counting once the cap is reached (and before base x streak overflows).
  if (base == 0 || static_cast<int64_t>(entry.streak) * base < max) ++entry.streak;
  const int64_t duration = std::min<int64_t>(max, base * entry.streak);

  s.consecutive_failures.store(0, std::memory_order_relaxed);
  s.ejections.fetch_add(1, std::memory_order_relaxed);
  if (s.state.load(std::memory_order_relaxed) != HealthState::kUnhealthy)
    s.reason.store(FailureReason::kEjected, std::memory_order_relaxed);
  // Never 0: 0 means "not ejected".
  s.ejected_until_ns.store(std::max<int64_t>(1, now_ns + duration), std::memory_order_release);
  if (hooks_.on_change) {
    hooks_.on_change(
        s, StateChange{entry.name, HealthState::kHealthy, HealthState::kUnhealthy, cause, true});
  }
}

bool OutlierDetector::OnProbeSuccess(BackendState& state, MonotonicTime probe_started) {
  const int64_t until = state.ejected_until_ns.load(std::memory_order_relaxed);
  if (until == 0 || ToNanos(probe_started) < until) return false;
  const HealthState now_state = state.state.load(std::memory_order_relaxed);
  if (now_state == HealthState::kHealthy)
    state.reason.store(FailureReason::kNone, std::memory_order_relaxed);
  state.ejected_until_ns.store(0, std::memory_order_release);
  auto it = entries_.find(&state);
  if (it != entries_.end()) it->second.returned_at_ns = ToNanos(time_.monotonic());
  if (hooks_.on_change) {
    const std::string name = it != entries_.end() ? it->second.name : std::string();
    hooks_.on_change(
        state, StateChange{name, HealthState::kUnhealthy, now_state, FailureReason::kNone, true});
  }
  return true;
}

size_t OutlierDetector::EjectedInRegion(size_t region) const {
  size_t n = 0;
  for (const auto& [ptr, entry] : entries_)
    if (entry.region == region && Ejected(*ptr)) ++n;
  return n;
}

uint32_t OutlierDetector::streak(const BackendState& state) const {
  auto it = entries_.find(&state);
  return it == entries_.end() ? 0 : it->second.streak;
}

}  // namespace geogate::health
