// The per-worker showback ledger: finished requests summed into per-minute
// buckets keyed by (minute, tenant, model, region, gpu, provider, tier,
// backend). Single-threaded like the rest of a worker's state, so Add() on the
// request path takes no lock and, once a key's bucket exists for the minute,
// allocates nothing. The server's ~1 s tick moves closed minutes to the
// process-wide ShowbackStore with TakeClosed(); queries that include the
// current minute read Snapshot().
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "accounting/showback_record.h"
#include "observability/metrics.h"

namespace geogate::accounting {

class ShowbackLedger {
 public:
  ShowbackLedger() = default;
  // It points into its own map (last_): a copy would share the pointer.
  ShowbackLedger(const ShowbackLedger&) = delete;
  ShowbackLedger& operator=(const ShowbackLedger&) = delete;

  /// Adds one finished request to the bucket of its minute (record.unix_ms).
  void Add(const ShowbackRecord& record);

  /// Removes and returns every bucket whose minute has ended by `now_unix_ms`
  /// (minute start + 60 s <= now). A record that arrives late for a minute
  /// already taken opens a new bucket for that minute, returned by the next
  /// call: buckets are additive, so the store simply sums them.
  std::vector<ShowbackBucket> TakeClosed(int64_t now_unix_ms);
  /// Removes and returns every bucket, open or not (shutdown).
  std::vector<ShowbackBucket> TakeAll();
  /// Copies of the buckets still held (the current minute, usually).
  std::vector<ShowbackBucket> Snapshot() const;

  /// Buckets held (one per minute and key).
  size_t size() const;
  bool empty() const { return minutes_.empty(); }

 private:
  /// One minute's buckets by key. Its look-up tries the last two keys
  /// before hashing (observability::SeriesMap): a worker's requests mostly
  /// repeat the key of the one before, and hashing the seven key strings
  /// was most of Add's cost.
  using Minute = observability::SeriesMap<kShowbackDims, ShowbackUsage>;

  std::vector<ShowbackBucket> Take(int64_t closed_before_minute_ms);

  absl::flat_hash_map<int64_t, Minute> minutes_;
  /// The minute the last Add went to, and its buckets (null after any
  /// insert or erase, which may move them): a worker's requests mostly
  /// end in the minute of the one before, so Add skips the map.
  int64_t last_minute_ms_ = 0;
  Minute* last_ = nullptr;
  /// The oldest minute held (INT64_MAX when empty): lets TakeClosed return at
  /// once in the 59 ticks a minute when nothing can have closed.
  int64_t oldest_minute_ms_ = INT64_MAX;
};

}  // namespace geogate::accounting
