#include "accounting/showback_ledger.h"

#include <algorithm>
#include <limits>

#include "common/strings.h"

namespace geogate::accounting {

size_t ShowbackLedger::Hash::operator()(const KeyView& k) const {
  return HashLabels(k.dims, static_cast<size_t>(k.minute_ms));
}

void ShowbackLedger::Add(const ShowbackRecord& record) {
  KeyView key{MinuteOf(record.unix_ms), DimsOf(record)};
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    Key owned{key.minute_ms, {}};
    for (size_t i = 0; i < kShowbackDims; ++i)
      owned.dims[i] = std::string(key.dims[i]);
    it = buckets_.emplace(std::move(owned), ShowbackUsage{}).first;
    oldest_minute_ms_ = std::min(oldest_minute_ms_, key.minute_ms);
  }
  it->second.Add(record);
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
  int64_t oldest_left = std::numeric_limits<int64_t>::max();
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    if (it->first.minute_ms < closed_before_minute_ms) {
      ShowbackBucket b;
      b.minute_ms = it->first.minute_ms;
      b.dims = it->first.dims;
      b.usage = it->second;
      out.push_back(std::move(b));
      buckets_.erase(it++);
    } else {
      oldest_left = std::min(oldest_left, it->first.minute_ms);
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
  out.reserve(buckets_.size());
  for (const auto& [k, u] : buckets_) {
    ShowbackBucket b;
    b.minute_ms = k.minute_ms;
    b.dims = k.dims;
    b.usage = u;
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace geogate::accounting
