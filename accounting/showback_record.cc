#include "accounting/showback_record.h"

#include <algorithm>
#include <chrono>

namespace geogate::accounting {

const char* ShowbackDimName(ShowbackDim d) {
  switch (d) {
    case ShowbackDim::kTenant:
      return "tenant";
    case ShowbackDim::kModel:
      return "model";
    case ShowbackDim::kRegion:
      return "region";
    case ShowbackDim::kGpu:
      return "gpu";
    case ShowbackDim::kProvider:
      return "provider";
    case ShowbackDim::kTier:
      return "tier";
    case ShowbackDim::kBackend:
      return "backend";
  }
  return "?";
}

ShowbackDimsView DimsOf(const ShowbackRecord& r) {
  return {r.tenant, r.model, r.region, r.gpu, r.provider, r.tier, r.backend};
}

ShowbackDimsView ViewOf(const ShowbackDims& d) {
  ShowbackDimsView v;
  for (size_t i = 0; i < kShowbackDims; ++i)
    v[i] = d[i];
  return v;
}

void ShowbackUsage::Add(const ShowbackRecord& r) {
  requests += r.requests;
  int64_t prompt = std::max<int64_t>(0, r.prompt_tokens);
  int64_t completion = std::max<int64_t>(0, r.completion_tokens);
  if (r.estimated) {
    estimated_requests += r.requests;
    estimated_prompt_tokens += prompt;
    estimated_completion_tokens += completion;
  } else {
    reported_prompt_tokens += prompt;
    reported_completion_tokens += completion;
  }
  gpu_seconds += r.gpu_seconds;
  cost += r.cost;
}

void ShowbackUsage::Add(const ShowbackUsage& u) {
  requests += u.requests;
  estimated_requests += u.estimated_requests;
  reported_prompt_tokens += u.reported_prompt_tokens;
  reported_completion_tokens += u.reported_completion_tokens;
  estimated_prompt_tokens += u.estimated_prompt_tokens;
  estimated_completion_tokens += u.estimated_completion_tokens;
  gpu_seconds += u.gpu_seconds;
  cost += u.cost;
}

double ShowbackUsage::estimated_share() const {
  int64_t all = prompt_tokens() + completion_tokens();
  if (all <= 0) return 0;
  return static_cast<double>(estimated_prompt_tokens + estimated_completion_tokens) /
         static_cast<double>(all);
}

int64_t MinuteOf(int64_t unix_ms) {
  int64_t m = unix_ms / kMinuteMs;
  if (unix_ms % kMinuteMs < 0) --m;  // floor, not truncation, before 1970
  return m * kMinuteMs;
}

int32_t UtcMonthOf(int64_t unix_ms) {
  using namespace std::chrono;
  sys_days day = floor<days>(sys_time<milliseconds>(milliseconds(unix_ms)));
  year_month_day ymd(day);
  return (static_cast<int>(ymd.year()) - 1970) * 12 +
         static_cast<int>(static_cast<unsigned>(ymd.month())) - 1;
}

int64_t UtcMonthStartMs(int32_t month) {
  using namespace std::chrono;
  int32_t y = 1970 + (month >= 0 ? month / 12 : (month - 11) / 12);
  int32_t m = month - (y - 1970) * 12;  // 0..11
  sys_days day = year(y) / static_cast<unsigned>(m + 1) / 1;
  return duration_cast<milliseconds>(day.time_since_epoch()).count();
}

double GpuSeconds(double stream_seconds, uint32_t capacity) {
  return std::max(0.0, stream_seconds) / std::max<uint32_t>(1, capacity);
}

double CostOf(double gpu_seconds, double cost_per_hour) {
  return gpu_seconds * cost_per_hour / 3600.0;
}

ShowbackRecord MakeShowbackRecord(const config::Snapshot& cfg, size_t backend,
                                  std::string_view tenant, std::string_view model,
                                  int64_t prompt_tokens, int64_t completion_tokens, bool estimated,
                                  double stream_seconds, int64_t unix_ms) {
  const config::Backend& b = cfg.backends[backend];
  ShowbackRecord r;
  r.unix_ms = unix_ms;
  r.tenant = tenant;
  r.model = model;
  r.region = cfg.regions[b.region_index].name;
  r.gpu = b.gpu;
  r.provider = b.provider;
  r.tier = config::TierName(b.tier);
  r.backend = b.name;
  r.requests = 1;
  r.prompt_tokens = std::max<int64_t>(0, prompt_tokens);
  r.completion_tokens = std::max<int64_t>(0, completion_tokens);
  r.estimated = estimated;
  r.gpu_seconds = GpuSeconds(stream_seconds, b.capacity);
  r.cost = CostOf(r.gpu_seconds, b.cost_per_hour);
  return r;
}

}  // namespace geogate::accounting
