// Showback queries (docs/showback.md, "Query API"): the parsed form of
// `/admin/showback?from=..&to=..&group_by=tenant,model&format=csv`, and the
// aggregation of minute buckets into grouped rows. Pure: the store feeds
// buckets in under its lock; the admin handler parses and formats.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "accounting/showback_record.h"

namespace geogate::accounting {

enum class ShowbackFormat : uint8_t { kJson, kCsv };

struct ShowbackQuery {
  /// Minute buckets that overlap [from_ms, to_ms) are counted.
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  /// Dimensions to group by, in the order asked; empty = one row of totals.
  std::vector<ShowbackDim> group_by;
  /// Per dimension, the values a bucket must have one of; empty = any.
  std::array<std::vector<std::string>, kShowbackDims> filters;
  ShowbackFormat format = ShowbackFormat::kJson;
  /// Include the minute still open in the workers' ledgers.
  bool live = true;
};

inline constexpr int64_t kDefaultShowbackRangeMs = 24 * 3600 * 1000;

/// Parses the query string of a showback request (the part after '?'; a
/// leading '?' is ignored; values are percent-decoded). Parameters:
///   from, to   RFC 3339 ("2025-03-01T00:00:00Z"), a date ("2025-03-01",
///              midnight UTC) or unix seconds; to defaults to now, from to
///              24 h before to; from must be before to.
///   group_by   comma-separated subset of tenant, model, region, gpu,
///              provider, tier, backend.
///   format     json (default) or csv.
///   live       true (default) or false: include the current open minute.
///   tenant, model, region, gpu, provider, tier, backend
///              filters: comma-separated values, a bucket matches any.
/// Unknown parameters and repeated ones are errors.
/// @return the query, or InvalidArgument with a message fit for the client.
absl::StatusOr<ShowbackQuery> ParseShowbackQuery(std::string_view query_string, int64_t now_ms);

/// One grouped row: the group's dimension values (parallel to group_by) and
/// its summed usage.
struct ShowbackRow {
  std::vector<std::string> group;
  ShowbackUsage usage;
};

struct ShowbackResult {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  std::vector<ShowbackDim> group_by;
  std::vector<ShowbackRow> rows;  // by cost, highest first; ties by group values
  ShowbackUsage totals;
};

/// Sums buckets into the rows of one query.
class ShowbackAggregator {
 public:
  explicit ShowbackAggregator(const ShowbackQuery& query) : query_(query) {}

  /// True when a bucket of `minute_ms` overlaps the query's range.
  bool InRange(int64_t minute_ms) const {
    return minute_ms < query_.to_ms && minute_ms + kMinuteMs > query_.from_ms;
  }
  /// Adds one bucket; ignored when outside the range or filtered out.
  void Add(int64_t minute_ms, const ShowbackDimsView& dims, const ShowbackUsage& usage);
  void Add(const ShowbackBucket& b) { Add(b.minute_ms, ViewOf(b.dims), b.usage); }
  ShowbackResult Finish() &&;

 private:
  const ShowbackQuery& query_;
  absl::flat_hash_map<std::vector<std::string>, ShowbackUsage> groups_;
  ShowbackUsage totals_;
};

}  // namespace geogate::accounting
