#include "accounting/showback_ledger.h"

#include <algorithm>
#include <limits>

namespace geogate::accounting {

void ShowbackLedger::Add(const ShowbackRecord& record) {
  int64_t minute = MinuteOf(record.unix_ms);
  if (last_ == nullptr || minute != last_minute_ms_) {
    auto [it, added] = minutes_.try_emplace(minute);
    if (added) oldest_minute_ms_ = std::min(oldest_minute_ms_, minute);
    last_minute_ms_ = minute;
    last_ = &it->second;
  }
  last_->FindOrAdd(DimsOf(record), [] { return ShowbackUsage{}; }).Add(record);
}

size_t ShowbackLedger::size() const {
  size_t n = 0;
  for (const auto& [minute, buckets] : minutes_)
    n += buckets.map().size();
  return n;
}

std::vector<ShowbackBucket> ShowbackLedger::TakeClosed(int64_t now_unix_ms) {
  // A minute is closed once its last millisecond has passed.
  return Take(MinuteOf(now_unix_ms));
}

std::vector<ShowbackBucket> ShowbackLedger::TakeAll() {
  return Take(std::numeric_limits<int64_t>::max());
}

std::vector<ShowbackBucket> ShowbackLedger::Take(int64_t closed_before_minute_ms) {
  std::vector<ShowbackBucket> out;
  if (oldest_minute_ms_ >= closed_before_minute_ms) return out;
  last_ = nullptr;  // erasing may move the minutes left
  int64_t oldest_left = std::numeric_limits<int64_t>::max();
  for (auto it = minutes_.begin(); it != minutes_.end();) {
    if (it->first < closed_before_minute_ms) {
      for (const auto& [dims, usage] : it->second.map()) {
        ShowbackBucket b;
        b.minute_ms = it->first;
        b.dims = dims;
        b.usage = usage;
        out.push_back(std::move(b));
      }
      minutes_.erase(it++);
    } else {
      oldest_left = std::min(oldest_left, it->first);
      ++it;
    }
  }
  oldest_minute_ms_ = oldest_left;
  // Oldest first, then by key: the order lines reach the file.
  std::sort(out.begin(), out.end(), [](const ShowbackBucket& a, const ShowbackBucket& b) {
    if (a.minute_ms != b.minute_ms) return a.minute_ms < b.minute_ms;
    return a.dims < b.dims;
  });
  return out;
}

std::vector<ShowbackBucket> ShowbackLedger::Snapshot() const {
  std::vector<ShowbackBucket> out;
  out.reserve(size());
  for (const auto& [minute, buckets] : minutes_)
    for (const auto& [dims, usage] : buckets.map()) {
      ShowbackBucket b;
      b.minute_ms = minute;
      b.dims = dims;
      b.usage = usage;
      out.push_back(std::move(b));
    }
  return out;
}

}  // namespace geogate::accounting
