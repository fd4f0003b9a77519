#include "accounting/capacity_utilization.h"

#include <algorithm>

namespace geogate::accounting {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;
constexpr int64_t kLongestWindowNs = 15 * 60 * kNanosPerSecond;

int64_t Nanos(std::chrono::nanoseconds d) {
  return d.count();
}

}  // namespace

const char* UtilWindowName(UtilWindow w) {
  switch (w) {
    case UtilWindow::k1m:
      return "1m";
    case UtilWindow::k5m:
      return "5m";
    case UtilWindow::k15m:
      return "15m";
  }
  return "?";
}

std::chrono::seconds UtilWindowLength(UtilWindow w) {
  switch (w) {
    case UtilWindow::k1m:
      return std::chrono::minutes(1);
    case UtilWindow::k5m:
      return std::chrono::minutes(5);
    case UtilWindow::k15m:
      return std::chrono::minutes(15);
  }
  return std::chrono::minutes(1);
}

void UtilizationTracker::set_sample_interval(health::Millis interval) {
  std::lock_guard<std::mutex> lock(mu_);
  max_gap_ = 3 * interval;
}

void UtilizationTracker::Sample(health::MonotonicTime now,
                                const std::vector<UtilizationSample>& samples) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now_ns = health::ToNanos(now);
  int64_t max_gap_ns = Nanos(max_gap_);
  for (const UtilizationSample& s : samples) {
    Series& series = series_[s.key];
    if (series.last_ns != 0 && now_ns > series.last_ns) {
      // The value seen now stands for the time since the previous sample,
      // but never for more than max_gap: beyond that nobody looked.
      int64_t start = std::max(series.last_ns, now_ns - max_gap_ns);
      series.segments.push_back(
          Segment{start, now_ns, s.inflight, std::max<uint32_t>(1, s.capacity), s.routable});
    }
    series.last_ns = std::max(series.last_ns, now_ns);
  }
  // Forget what no window can reach any more, and backends gone that long.
  int64_t horizon = now_ns - kLongestWindowNs;
  for (auto it = series_.begin(); it != series_.end();) {
    Series& series = it->second;
    while (!series.segments.empty() && series.segments.front().end_ns <= horizon)
      series.segments.pop_front();
    if (series.segments.empty() && series.last_ns <= horizon) {
      series_.erase(it++);
    } else {
      ++it;
    }
  }
}

void UtilizationTracker::Sample(health::MonotonicTime now, const config::Snapshot& cfg,
                                const std::vector<health::BackendStatePtr>& states) {
  std::vector<UtilizationSample> samples;
  samples.reserve(cfg.backends.size());
  int64_t now_ns = health::ToNanos(now);
  for (size_t i = 0; i < cfg.backends.size() && i < states.size(); ++i) {
    const health::BackendState& st = *states[i];
    samples.push_back(UtilizationSample{cfg.backends[i].state_key(),
                                        st.inflight.load(std::memory_order_relaxed),
                                        cfg.backends[i].capacity, st.routable(now_ns)});
  }
  Sample(now, samples);
}

BackendUsage UtilizationTracker::Usage(const std::string& key, UtilWindow w,
                                       health::MonotonicTime now) const {
  std::lock_guard<std::mutex> lock(mu_);
  BackendUsage u;
  auto it = series_.find(key);
  if (it == series_.end()) return u;
  int64_t now_ns = health::ToNanos(now);
  int64_t from_ns = now_ns - Nanos(UtilWindowLength(w));
  const std::deque<Segment>& segs = it->second.segments;
  // Segments are in time order; walk back from the newest.
  for (auto s = segs.rbegin(); s != segs.rend() && s->end_ns > from_ns; ++s) {
    int64_t a = std::max(s->start_ns, from_ns);
    int64_t b = std::min(s->end_ns, now_ns);
    if (b <= a) continue;
    double dt = static_cast<double>(b - a) / kNanosPerSecond;
    u.covered_seconds += dt;
    u.inflight_seconds += dt * s->inflight;
    u.capacity_seconds += dt * s->capacity;
    if (s->routable) u.offered_seconds += dt * s->capacity;
  }
  return u;
}

size_t UtilizationTracker::tracked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return series_.size();
}

}  // namespace geogate::accounting
