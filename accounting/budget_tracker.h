// Per-tenant monthly budgets ([[tenants]] monthly_budget; docs/showback.md,
// "Budgets"). Each tenant has one BudgetState shared by every worker: the
// spend of the current UTC calendar month in micro-dollars, in one atomic
// word together with the month it belongs to, so a charge and a month
// rollover can never lose each other. The request path only touches that
// word (Exceeded at request start, Charge at request end); the server's tick
// collects the 80 % warning and the 100 % notice, each once per month.
// States are kept across reloads by tenant name, like TenantLimits.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "config/snapshot.h"

namespace geogate::observability {
class PromWriter;
}  // namespace geogate::observability

namespace geogate::accounting {

class BudgetState {
 public:
  explicit BudgetState(std::string tenant) : tenant_(std::move(tenant)) {}
  const std::string& tenant() const { return tenant_; }

  // ---- request path (any worker, lock-free) --------------------------------
  /// True when the tenant has a budget and this month's spend has reached it.
  bool Exceeded(int64_t now_unix_ms) const;
  /// Adds `dollars` (rounded to micro-dollars) to the month holding
  /// `now_unix_ms`, starting that month from zero when it is new.
  void Charge(double dollars, int64_t now_unix_ms);

  // ---- anywhere ------------------------------------------------------------
  /// This month's spend in dollars (0 once the month has turned).
  double Spent(int64_t now_unix_ms) const;
  /// The monthly budget in dollars, or nullopt for none.
  std::optional<double> budget() const;
  /// Spent / budget; nullopt without a budget. A budget of 0 reads as 1.
  std::optional<double> UsedRatio(int64_t now_unix_ms) const;

 private:
  friend class BudgetTracker;
  int64_t SpentMicros(int64_t now_unix_ms) const;

  std::string tenant_;
  /// (month index + 1) << 52 | micro-dollars; 0 = nothing charged yet.
  std::atomic<uint64_t> spend_{0};
  std::atomic<int64_t> limit_micros_{-1};  // -1 = no budget
  // Written by the server's tick only: the month each notice last fired.
  int32_t warned_month_ = -1;
  int32_t exceeded_month_ = -1;
};
using BudgetStatePtr = std::shared_ptr<BudgetState>;

/// A notice for the server to log: a tenant crossed 80 % (kWarning) or 100 %
/// (kExceeded) of its budget this month.
struct BudgetEvent {
  enum class Kind : uint8_t { kWarning, kExceeded };
  Kind kind = Kind::kWarning;
  std::string tenant;
  double spent = 0;
  double budget = 0;
  int32_t month = 0;  // UtcMonthOf
  /// "tenant 'acme' has used 81% of its monthly budget (405.12 of 500.00) in 2025-03"
  std::string Describe() const;
};

/// Share of the budget at which the warning fires.
inline constexpr double kBudgetWarnRatio = 0.8;

class BudgetTracker {
 public:
  /// One state per snapshot tenant, in order, with the snapshot's budgets
  /// applied. Reload-time only; states of tenants still configured keep
  /// their spend.
  std::vector<BudgetStatePtr> Bind(const config::Snapshot& snap);

  /// Startup: adds month-to-date spend per tenant (ShowbackStore::MonthSpend)
  /// to this month. Call once, before or after the first Bind.
  void Seed(const absl::flat_hash_map<std::string, double>& month_spend, int64_t now_unix_ms);

  /// The tick: notices due since the last call, each at most once per
  /// tenant and month.
  std::vector<BudgetEvent> Poll(int64_t now_unix_ms);

  /// Writes geogate_tenant_budget_used_ratio{tenant},
  /// geogate_tenant_budget_spent_dollars{tenant} and
  /// geogate_tenant_budget_dollars{tenant} for tenants with a budget.
  void WriteMetrics(observability::PromWriter& w, int64_t now_unix_ms) const;

  /// The state of `tenant`, or null.
  BudgetStatePtr Find(const std::string& tenant) const;

 private:
  BudgetStatePtr GetLocked(const std::string& tenant);

  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, BudgetStatePtr> states_;
};

/// Seconds from `now_unix_ms` to the start of the next UTC month, rounded
/// up: the Retry-After of a 429 budget_exceeded.
int64_t BudgetRetryAfterSeconds(int64_t now_unix_ms);

}  // namespace geogate::accounting
