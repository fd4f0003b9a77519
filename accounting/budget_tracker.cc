#include "accounting/budget_tracker.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_format.h"
#include "accounting/showback_record.h"
#include "observability/metrics.h"

namespace geogate::accounting {
namespace {

// The spend word: the month (plus one, so that 0 means "never charged") in
// the top 12 bits, micro-dollars in the low 52. 4095 months reach past the
// year 2300; 2^52 micro-dollars is about $4.5 billion a month.
constexpr int kMonthShift = 52;
constexpr uint64_t kMicrosMask = (uint64_t{1} << kMonthShift) - 1;

int32_t MonthOfWord(uint64_t w) {
  return static_cast<int32_t>(w >> kMonthShift) - 1;
}
int64_t MicrosOfWord(uint64_t w) {
  return static_cast<int64_t>(w & kMicrosMask);
}
uint64_t Word(int32_t month, int64_t micros) {
  uint64_t m = static_cast<uint64_t>(std::clamp(month + 1, 1, 4095));
  uint64_t v = static_cast<uint64_t>(std::clamp<int64_t>(micros, 0, kMicrosMask));
  return (m << kMonthShift) | v;
}

/// Budget limits: to the nearest micro-dollar.
int64_t ToMicros(double dollars) {
  if (!std::isfinite(dollars) || dollars <= 0) return 0;
  double micros = std::round(dollars * 1e6);
  return micros >= static_cast<double>(kMicrosMask) ? static_cast<int64_t>(kMicrosMask)
                                                    : static_cast<int64_t>(micros);
}

/// Charges: rounded stochastically (up with the probability of the
/// fraction), so the many sub-micro-dollar charges of short requests on
/// cheap GPUs add up to the right expected spend instead of rounding to 0.
int64_t ChargeMicros(double dollars) {
  if (!std::isfinite(dollars) || dollars <= 0) return 0;
  double micros = dollars * 1e6;
  if (micros >= static_cast<double>(kMicrosMask)) return static_cast<int64_t>(kMicrosMask);
  double whole = std::floor(micros);
  thread_local std::minstd_rand rng{std::random_device{}()};
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  return static_cast<int64_t>(whole) + (u < micros - whole ? 1 : 0);
}

std::string MonthName(int32_t month) {
  int32_t y = 1970 + (month >= 0 ? month / 12 : (month - 11) / 12);
  return absl::StrFormat("%04d-%02d", y, month - (y - 1970) * 12 + 1);
}

}  // namespace

int64_t BudgetState::SpentMicros(int64_t now_unix_ms) const {
  uint64_t w = spend_.load(std::memory_order_relaxed);
  return MonthOfWord(w) == UtcMonthOf(now_unix_ms) ? MicrosOfWord(w) : 0;
}

bool BudgetState::Exceeded(int64_t now_unix_ms) const {
  int64_t limit = limit_micros_.load(std::memory_order_relaxed);
  return limit >= 0 && SpentMicros(now_unix_ms) >= limit;
}

void BudgetState::Charge(double dollars, int64_t now_unix_ms) {
  int64_t add = ChargeMicros(dollars);
  if (add == 0) return;
  int32_t month = UtcMonthOf(now_unix_ms);
  uint64_t w = spend_.load(std::memory_order_relaxed);
  for (;;) {
    int32_t have = MonthOfWord(w);
    // A charge stamped with an older month than the word's (a request that
    // ended just before midnight, racing one after) goes to the newer month:
    // the old month is over and its spend no longer gates anything.
    int32_t to = std::max(have, month);
    int64_t base = have == to ? MicrosOfWord(w) : 0;
    if (spend_.compare_exchange_weak(w, Word(to, base + add), std::memory_order_relaxed)) return;
  }
}

double BudgetState::Spent(int64_t now_unix_ms) const {
  return static_cast<double>(SpentMicros(now_unix_ms)) / 1e6;
}

std::optional<double> BudgetState::budget() const {
  int64_t limit = limit_micros_.load(std::memory_order_relaxed);
  if (limit < 0) return std::nullopt;
  return static_cast<double>(limit) / 1e6;
}

std::optional<double> BudgetState::UsedRatio(int64_t now_unix_ms) const {
  int64_t limit = limit_micros_.load(std::memory_order_relaxed);
  if (limit < 0) return std::nullopt;
  if (limit == 0) return 1.0;  // a zero budget admits nothing: fully used
  return static_cast<double>(SpentMicros(now_unix_ms)) / static_cast<double>(limit);
}

std::string BudgetEvent::Describe() const {
  if (kind == Kind::kExceeded) {
    return absl::StrFormat(
        "tenant '%s' has spent its monthly budget (%.2f of %.2f) in %s: requests get 429 "
        "budget_exceeded until the month ends",
        tenant, spent, budget, MonthName(month));
  }
  return absl::StrFormat("tenant '%s' has used %.0f%% of its monthly budget (%.2f of %.2f) in %s",
                         tenant, budget > 0 ? 100 * spent / budget : 100.0, spent, budget,
                         MonthName(month));
}

BudgetStatePtr BudgetTracker::GetLocked(const std::string& tenant) {
  BudgetStatePtr& s = states_[tenant];
  if (!s) s = std::make_shared<BudgetState>(tenant);
  return s;
}

std::vector<BudgetStatePtr> BudgetTracker::Bind(const config::Snapshot& snap) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BudgetStatePtr> out;
  absl::flat_hash_map<std::string, BudgetStatePtr> next;
  for (const config::Tenant& t : snap.tenants) {
    BudgetStatePtr s = GetLocked(t.name);
    s->limit_micros_.store(t.monthly_budget ? ToMicros(*t.monthly_budget) : -1,
                           std::memory_order_relaxed);
    next[t.name] = s;
    out.push_back(s);
  }
  states_ = std::move(next);
  return out;
}

void BudgetTracker::Seed(const absl::flat_hash_map<std::string, double>& month_spend,
                         int64_t now_unix_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [tenant, dollars] : month_spend) {
    if (tenant.empty()) continue;  // tenants not configured when it was spent
    GetLocked(tenant)->Charge(dollars, now_unix_ms);
  }
}

std::vector<BudgetEvent> BudgetTracker::Poll(int64_t now_unix_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BudgetEvent> out;
  int32_t month = UtcMonthOf(now_unix_ms);
  for (const auto& [name, s] : states_) {
    std::optional<double> ratio = s->UsedRatio(now_unix_ms);
    if (!ratio) continue;
    BudgetEvent e;
    e.tenant = name;
    e.spent = s->Spent(now_unix_ms);
    e.budget = *s->budget();
    e.month = month;
    // A tenant that jumps past 100 % in one tick gets both notices, the
    // warning first: the 80 % line is "once per month", whatever follows.
    if (*ratio >= kBudgetWarnRatio && s->warned_month_ != month) {
      s->warned_month_ = month;
      e.kind = BudgetEvent::Kind::kWarning;
      out.push_back(e);
    }
    if (s->Exceeded(now_unix_ms) && s->exceeded_month_ != month) {
      s->exceeded_month_ = month;
      e.kind = BudgetEvent::Kind::kExceeded;
      out.push_back(e);
    }
  }
  std::sort(out.begin(), out.end(), [](const BudgetEvent& a, const BudgetEvent& b) {
    if (a.tenant != b.tenant) return a.tenant < b.tenant;
    return a.kind < b.kind;
  });
  return out;
}

void BudgetTracker::WriteMetrics(observability::PromWriter& w, int64_t now_unix_ms) const {
  std::vector<BudgetStatePtr> states;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, s] : states_)
      if (s->budget()) states.push_back(s);
  }
  std::sort(states.begin(), states.end(), [](const BudgetStatePtr& a, const BudgetStatePtr& b) {
    return a->tenant() < b->tenant();
  });
  w.Family("geogate_tenant_budget_used_ratio", "gauge",
           "Share of the tenant's monthly budget spent this UTC month (1 = exhausted).");
  for (const auto& s : states)
    w.Sample("geogate_tenant_budget_used_ratio", {{"tenant", s->tenant()}},
             *s->UsedRatio(now_unix_ms));
  w.Family("geogate_tenant_budget_spent_dollars", "gauge",
           "Tenant spend this UTC month, in the unit of cost_per_hour.");
  for (const auto& s : states)
    w.Sample("geogate_tenant_budget_spent_dollars", {{"tenant", s->tenant()}},
             s->Spent(now_unix_ms));
  w.Family("geogate_tenant_budget_dollars", "gauge", "The tenant's monthly budget.");
  for (const auto& s : states)
    w.Sample("geogate_tenant_budget_dollars", {{"tenant", s->tenant()}}, *s->budget());
}

BudgetStatePtr BudgetTracker::Find(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(tenant);
  return it == states_.end() ? nullptr : it->second;
}

int64_t BudgetRetryAfterSeconds(int64_t now_unix_ms) {
  int64_t next = UtcMonthStartMs(UtcMonthOf(now_unix_ms) + 1);
  return std::max<int64_t>(1, (next - now_unix_ms + 999) / 1000);
}

}  // namespace geogate::accounting
