// Request counters, sharded per worker thread so the request path never
// contends: a worker only touches its own shard; the control listener sums.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

namespace gpusim {

/// One worker's counters. Scalars are single-writer relaxed atomics; the
/// keyed maps sit behind a mutex that only the stats reader ever contends.
struct alignas(64) StatsShard {
  std::atomic<uint64_t> requests_total{0};
  std::atomic<uint64_t> health_checks{0};
  std::atomic<uint64_t> streams_started{0};
  std::atomic<uint64_t> streams_completed{0};
  std::atomic<uint64_t> streams_cancelled{0};
  std::atomic<uint64_t> streams_aborted{0};  // die_after resets
  std::atomic<uint64_t> tokens_generated{0};
  std::atomic<uint64_t> prompt_tokens{0};

  /// Counts one request on `path` from `client` (model may be empty).
  void count_request(std::string_view path, std::string_view client);
  void count_model(std::string_view model);

  static void bump(std::atomic<uint64_t>& c, uint64_t by = 1) {
    c.fetch_add(by, std::memory_order_relaxed);
  }

 private:
  friend class Stats;
  using Counts = std::map<std::string, uint64_t, std::less<>>;
  static void bump_key(Counts& counts, std::string_view key);

  std::mutex mu_;
  Counts by_path_;
  Counts by_client_;
  Counts by_model_;
};

/// All shards. The shard vector is fixed at start-up.
class Stats {
 public:
  explicit Stats(size_t shards);

  StatsShard& shard(size_t i) { return *shards_[i]; }

  /// The counter fields of `GET /control/stats` (without name/mode/inflight).
  boost::json::object snapshot() const;
  uint64_t sum(std::atomic<uint64_t> StatsShard::*field) const;
  void reset();

 private:
  std::vector<std::unique_ptr<StatsShard>> shards_;
};

}  // namespace gpusim
