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

namespace geogate::accounting {

class ShowbackLedger {
 public:
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

  size_t size() const { return buckets_.size(); }
  bool empty() const { return buckets_.empty(); }

 private:
  struct KeyView {
    int64_t minute_ms;
    ShowbackDimsView dims;
  };
  struct Key {
    int64_t minute_ms;
    ShowbackDims dims;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(const KeyView& k) const;
    size_t operator()(const Key& k) const { return (*this)(KeyView{k.minute_ms, ViewOf(k.dims)}); }
  };
  struct Eq {
    using is_transparent = void;
    static KeyView V(const Key& k) { return {k.minute_ms, ViewOf(k.dims)}; }
    static const KeyView& V(const KeyView& k) { return k; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      const KeyView& x = V(a);
      const KeyView& y = V(b);
      return x.minute_ms == y.minute_ms && x.dims == y.dims;
    }
  };

  std::vector<ShowbackBucket> Take(int64_t closed_before_minute_ms);

  absl::flat_hash_map<Key, ShowbackUsage, Hash, Eq> buckets_;
  /// The oldest minute held (INT64_MAX when empty): lets TakeClosed return at
  /// once in the 59 ticks a minute when nothing can have closed.
  int64_t oldest_minute_ms_ = INT64_MAX;
};

}  // namespace geogate::accounting
