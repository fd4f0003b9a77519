// The process-wide showback store (docs/showback.md): closed minute buckets
// from every worker's ShowbackLedger, kept in memory for [showback]
// window_hours and appended as JSON lines (showback_line.h) to [showback]
// file. On startup the file is replayed, so a restart loses nothing already
// written. Thread-safe with one mutex; never on the request path (the server
// feeds it from its ~1 s tick, the admin endpoint queries it).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "accounting/showback_query.h"
#include "accounting/showback_record.h"
#include "config/snapshot.h"

namespace geogate::accounting {

struct ShowbackStoreOptions {
  std::string file;  // absolute path; "" = memory only
  uint32_t window_hours = 168;
  std::string edge;  // written into every line

  static ShowbackStoreOptions From(const config::Snapshot& snap);
};

/// What replaying the file found.
struct ShowbackReplay {
  uint64_t lines = 0;           // non-empty lines read
  uint64_t loaded = 0;          // buckets inside the window, now queryable
  uint64_t outside_window = 0;  // valid but older than the window
  uint64_t malformed = 0;       // skipped: not a valid version-1 line
  bool torn_tail = false;       // the file ended in an incomplete line
  std::string first_error;      // "line N: ..." for the first malformed line
};

struct ShowbackStoreStats {
  uint64_t buckets = 0;  // (minute, key) entries in memory
  int64_t oldest_minute_ms = 0;
  uint64_t lines_written = 0;
  uint64_t write_errors = 0;
  std::string last_error;
};

class ShowbackStore {
 public:
  ShowbackStore() = default;
  ~ShowbackStore();
  ShowbackStore(const ShowbackStore&) = delete;
  ShowbackStore& operator=(const ShowbackStore&) = delete;

  /// Startup: replays `options.file` (a missing file is empty) into memory,
  /// then opens it for appending. Call once, before Append.
  /// @return the replay counts; an error only when the file exists but
  ///         cannot be read, or cannot be opened for appending (the store
  ///         then keeps working in memory and retries opening on Append).
  absl::StatusOr<ShowbackReplay> Open(const ShowbackStoreOptions& options, int64_t now_unix_ms);

  /// Reload: a new window applies at once (a shorter one drops older
  /// buckets; a longer one does not bring dropped ones back); a new file
  /// path is opened for appending from now on and is not replayed.
  absl::Status Configure(const ShowbackStoreOptions& options, int64_t now_unix_ms);

  /// SIGHUP (log rotation): closes and reopens the file by path.
  absl::Status Reopen();

  /// The tick: merges buckets of the same (minute, key) from several
  /// workers, keeps them in memory and appends them to the file with one
  /// write of whole lines; then drops buckets older than the window.
  void Append(const std::vector<ShowbackBucket>& closed, int64_t now_unix_ms);

  /// Runs `query` over the buckets in memory plus `live` (the workers' open
  /// buckets, used only when query.live).
  ShowbackResult Query(const ShowbackQuery& query,
                       const std::vector<ShowbackBucket>& live = {}) const;

  /// Spend per tenant (dollars) in the UTC calendar month holding
  /// `now_unix_ms`, from every line replayed (also those older than the
  /// window) and every bucket appended since: seeds the BudgetTracker.
  absl::flat_hash_map<std::string, double> MonthSpend(int64_t now_unix_ms) const;

  ShowbackStoreStats stats() const;

 private:
  using Minute = absl::flat_hash_map<uint32_t, ShowbackUsage>;  // dims id -> usage

  uint32_t InternLocked(const ShowbackDims& dims);
  void AddLocked(const ShowbackBucket& b);
  void PruneLocked(int64_t now_unix_ms);
  absl::Status OpenFileLocked();
  void CloseFileLocked();
  void WriteLocked(std::string& lines);

  mutable std::mutex mu_;
  ShowbackStoreOptions options_;
  int fd_ = -1;
  /// The file may end mid-line (a failed or cut-short write): the next
  /// write starts with a newline so that fragment stays a line of its own.
  bool torn_ = false;
  std::vector<ShowbackDims> dims_;  // id -> dims
  absl::flat_hash_map<ShowbackDims, uint32_t> dims_ids_;
  std::map<int64_t, Minute> minutes_;  // minute start (unix ms) -> buckets
  uint64_t buckets_ = 0;
  /// month index (see budget_tracker.h) -> tenant -> dollars.
  std::map<int32_t, absl::flat_hash_map<std::string, double>> month_spend_;
  uint64_t lines_written_ = 0;
  uint64_t write_errors_ = 0;
  std::string last_error_;
};

}  // namespace geogate::accounting
