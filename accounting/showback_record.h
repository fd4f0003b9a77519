// The unit of showback (docs/showback.md): what one finished request cost,
// and the per-minute aggregate of many. Plain values, no I/O; the ledger,
// store, query and budget modules all speak these types.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/snapshot.h"

namespace geogate::accounting {

/// The dimensions a bucket is keyed by and a query may group by, in the
/// order they appear in files, JSON rows and CSV columns.
enum class ShowbackDim : uint8_t {
  kTenant,
  kModel,
  kRegion,
  kGpu,
  kProvider,
  kTier,
  kBackend,
};
inline constexpr size_t kShowbackDims = 7;
/// "tenant", "model", ... as used in files, query strings and output.
const char* ShowbackDimName(ShowbackDim d);

/// One finished request. The worker builds it at request end (see
/// MakeShowbackRecord) and hands it to its ShowbackLedger.
struct ShowbackRecord {
  int64_t unix_ms = 0;  // wall-clock time the request ended
  std::string tenant;   // "" when tenants are not configured
  std::string model;
  std::string region;
  std::string gpu;
  std::string provider;
  std::string tier;
  std::string backend;
  uint64_t requests = 1;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  bool estimated = false;  // tokens counted from SSE events, no `usage` object
  double gpu_seconds = 0;
  double cost = 0;
};

/// The seven dimension values of a bucket, indexed by ShowbackDim.
using ShowbackDims = std::array<std::string, kShowbackDims>;
using ShowbackDimsView = std::array<std::string_view, kShowbackDims>;

ShowbackDimsView DimsOf(const ShowbackRecord& r);
ShowbackDimsView ViewOf(const ShowbackDims& d);

/// Summed usage. Reported tokens (from the backend's `usage` object) and
/// estimated ones (counted from SSE events) are kept apart so a reader can
/// tell how much of a bill rests on estimates.
struct ShowbackUsage {
  uint64_t requests = 0;
  uint64_t estimated_requests = 0;
  int64_t reported_prompt_tokens = 0;
  int64_t reported_completion_tokens = 0;
  int64_t estimated_prompt_tokens = 0;
  int64_t estimated_completion_tokens = 0;
  double gpu_seconds = 0;
  double cost = 0;

  void Add(const ShowbackRecord& r);
  void Add(const ShowbackUsage& u);
  int64_t prompt_tokens() const { return reported_prompt_tokens + estimated_prompt_tokens; }
  int64_t completion_tokens() const {
    return reported_completion_tokens + estimated_completion_tokens;
  }
  /// Estimated tokens / all tokens; 0 when there are no tokens.
  double estimated_share() const;
  bool operator==(const ShowbackUsage&) const = default;
};

/// Usage of one key during one UTC minute.
struct ShowbackBucket {
  int64_t minute_ms = 0;  // unix ms of the minute's start (a multiple of 60000)
  ShowbackDims dims;
  ShowbackUsage usage;
};

inline constexpr int64_t kMinuteMs = 60000;
/// The start of the UTC minute holding `unix_ms` (floor, also before 1970).
int64_t MinuteOf(int64_t unix_ms);

/// Months since January 1970 (UTC) of the calendar month holding `unix_ms`:
/// budgets reset and month-to-date spend is summed per this index.
int32_t UtcMonthOf(int64_t unix_ms);
/// Unix ms of the first instant of month index `month`.
int64_t UtcMonthStartMs(int32_t month);

/// A request's share of one GPU for as long as it streamed: a backend with
/// `capacity` concurrent streams at 100 % utilisation gives each stream
/// 1/capacity of the GPU. Capacity 0 counts as 1.
double GpuSeconds(double stream_seconds, uint32_t capacity);
/// GPU-seconds priced at the backend's hourly rate.
double CostOf(double gpu_seconds, double cost_per_hour);

/// Builds the record for a request that streamed `stream_seconds` from
/// `cfg.backends[backend]`. Negative token counts (unknown) count as 0.
ShowbackRecord MakeShowbackRecord(const config::Snapshot& cfg, size_t backend,
                                  std::string_view tenant, std::string_view model,
                                  int64_t prompt_tokens, int64_t completion_tokens, bool estimated,
                                  double stream_seconds, int64_t unix_ms);

}  // namespace geogate::accounting
