// Per-tenant monthly budgets: enforcement, month rollover, the 80 % warning
// once per month, seeding from the store and survival across reloads.
#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "accounting/budget_tracker.h"
#include "accounting/showback_record.h"
#include "observability/metrics.h"
#include "showback_test_util.h"

namespace geogate::accounting {
namespace {

using testing::Ms;

config::SnapshotConstPtr Budgets(std::string_view acme_budget) {
  std::string text = absl::StrCat(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[tenants]]
name = "acme"
api_key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000001"]
)",
                                  ToAbsl(acme_budget), R"(
[[tenants]]
name = "beta"
api_key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000002"]
)");
  return testing::LoadSnapshot(text);
}

TEST_CASE("a tenant is refused once its month's spend reaches the budget", "[budget]") {
  BudgetTracker tracker;
  auto states = tracker.Bind(*Budgets("monthly_budget = 10"));
  REQUIRE(states.size() == 2);
  BudgetState& acme = *states[0];
  BudgetState& beta = *states[1];
  int64_t t = Ms("2025-03-10T12:00:00Z");
  CHECK_FALSE(acme.Exceeded(t));
  acme.Charge(9.999999, t);
  CHECK_FALSE(acme.Exceeded(t));
  CHECK(acme.Spent(t) == Approx(9.999999));
  acme.Charge(0.000001, t);
  CHECK(acme.Exceeded(t));
  CHECK(*acme.UsedRatio(t) == Approx(1.0));
  // No budget: counted, never refused.
  beta.Charge(1e6, t);
  CHECK_FALSE(beta.Exceeded(t));
  CHECK(beta.Spent(t) == 1e6);
  CHECK_FALSE(beta.UsedRatio(t));
}

TEST_CASE("small charges add up to the right spend", "[budget]") {
  BudgetTracker tracker;
  auto states = tracker.Bind(*Budgets("monthly_budget = 1"));
  int64_t t = Ms("2025-03-10T12:00:00Z");
  // 30 s on an H100 at $2.49/h with capacity 64 costs $0.00032421875.
  for (int i = 0; i < 1000; ++i)
    states[0]->Charge(0.00032421875, t);
  // Each charge rounds stochastically to 324 or 325 micro-dollars.
  double spent = states[0]->Spent(t);
  CHECK(spent >= 0.324);
  CHECK(spent <= 0.325);
  CHECK(spent == Approx(0.32421875).margin(0.0001));
  states[0]->Charge(0, t);
  states[0]->Charge(-5, t);  // never refunds
  CHECK(states[0]->Spent(t) == spent);
  // Charges far below a micro-dollar (a short request on a cheap GPU) are
  // not rounded away: 100,000 x $0.0000004 is $0.04 in expectation.
  BudgetTracker other;
  auto small = other.Bind(*Budgets("monthly_budget = 1"));
  for (int i = 0; i < 100000; ++i)
    small[0]->Charge(0.0000004, t);
  CHECK(small[0]->Spent(t) == Approx(0.04).margin(0.002));
}

TEST_CASE("a new UTC month starts from zero", "[budget]") {
  BudgetTracker tracker;
  auto states = tracker.Bind(*Budgets("monthly_budget = 10"));
  BudgetState& acme = *states[0];
  acme.Charge(12, Ms("2025-03-31T23:59:59Z"));
  CHECK(acme.Exceeded(Ms("2025-03-31T23:59:59.999Z")));
  CHECK_FALSE(acme.Exceeded(Ms("2025-04-01T00:00:00Z")));
  CHECK(acme.Spent(Ms("2025-04-01T00:00:00Z")) == 0);
  acme.Charge(3, Ms("2025-04-01T00:00:01Z"));
  CHECK(acme.Spent(Ms("2025-04-02T00:00:00Z")) == 3);
  // A straggler stamped with the old month lands in the new one.
  acme.Charge(1, Ms("2025-03-31T23:59:59Z"));
  CHECK(acme.Spent(Ms("2025-04-02T00:00:00Z")) == 4);
  // Across a year boundary too.
  acme.Charge(20, Ms("2025-12-31T23:00:00Z"));
  CHECK(acme.Exceeded(Ms("2025-12-31T23:30:00Z")));
  CHECK_FALSE(acme.Exceeded(Ms("2026-01-01T00:00:00Z")));
}

TEST_CASE("the 80 percent warning fires once per month", "[budget]") {
  BudgetTracker tracker;
  auto states = tracker.Bind(*Budgets("monthly_budget = 100"));
  BudgetState& acme = *states[0];
  int64_t t = Ms("2025-03-10T12:00:00Z");
  acme.Charge(79.99, t);
  CHECK(tracker.Poll(t).empty());
  acme.Charge(0.01, t);
  auto events = tracker.Poll(t);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == BudgetEvent::Kind::kWarning);
  CHECK(events[0].tenant == "acme");
  CHECK(events[0].spent == Approx(80));
  CHECK(events[0].budget == 100);
  CHECK(events[0].Describe() ==
        "tenant 'acme' has used 80% of its monthly budget (80.00 of 100.00) in 2025-03");
  acme.Charge(5, t);
  CHECK(tracker.Poll(t).empty());  // once per month

  acme.Charge(15, t);
  events = tracker.Poll(t);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == BudgetEvent::Kind::kExceeded);
  CHECK(events[0].Describe().rfind("tenant 'acme' has spent its monthly budget (100.00 of 100.00)",
                                   0) == 0);
  CHECK(tracker.Poll(t).empty());

  // Next month: fresh spend, and the notices may fire again, both at once
  // when one tick sees the whole budget go.
  int64_t april = Ms("2025-04-02T00:00:00Z");
  CHECK(tracker.Poll(april).empty());
  acme.Charge(150, april);
  events = tracker.Poll(april);
  REQUIRE(events.size() == 2);
  CHECK(events[0].kind == BudgetEvent::Kind::kWarning);
  CHECK(events[1].kind == BudgetEvent::Kind::kExceeded);
  CHECK(events[0].month == UtcMonthOf(april));
}

TEST_CASE("state survives reloads by tenant name and takes the new budget", "[budget]") {
  BudgetTracker tracker;
  int64_t t = Ms("2025-03-10T12:00:00Z");
  auto before = tracker.Bind(*Budgets("monthly_budget = 10"));
  before[0]->Charge(8, t);
  CHECK(tracker.Poll(t).size() == 1);

  auto after = tracker.Bind(*Budgets("monthly_budget = 5"));
  CHECK(after[0] == before[0]);
  CHECK(after[0]->Exceeded(t));
  CHECK(after[0]->Spent(t) == 8);
  auto events = tracker.Poll(t);
  REQUIRE(events.size() == 1);  // the warning already fired this month
  CHECK(events[0].kind == BudgetEvent::Kind::kExceeded);

  auto unlimited = tracker.Bind(*Budgets(""));
  CHECK_FALSE(unlimited[0]->Exceeded(t));
  CHECK_FALSE(unlimited[0]->budget());

  // A tenant removed and added back starts over.
  tracker.Bind(*testing::LoadSnapshot("[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\n"));
  CHECK(tracker.Find("acme") == nullptr);
  auto back = tracker.Bind(*Budgets("monthly_budget = 10"));
  CHECK(back[0]->Spent(t) == 0);
}

TEST_CASE("a zero budget admits nothing", "[budget]") {
  BudgetTracker tracker;
  auto states = tracker.Bind(*Budgets("monthly_budget = 0"));
  int64_t t = Ms("2025-03-10T12:00:00Z");
  CHECK(states[0]->Exceeded(t));
  CHECK(*states[0]->UsedRatio(t) == 1);
}

TEST_CASE("seeding from the store restores month-to-date spend", "[budget]") {
  BudgetTracker tracker;
  int64_t t = Ms("2025-03-10T12:00:00Z");
  // Seed may come before the first Bind (the store replays first) ...
  tracker.Seed({{"acme", 9.5}, {"", 3}}, t);
  auto states = tracker.Bind(*Budgets("monthly_budget = 10"));
  CHECK(states[0]->Spent(t) == 9.5);
  CHECK_FALSE(states[0]->Exceeded(t));
  states[0]->Charge(0.5, t);
  CHECK(states[0]->Exceeded(t));
  // ... or after it.
  tracker.Seed({{"beta", 2}}, t);
  CHECK(states[1]->Spent(t) == 2);
}

TEST_CASE("budget metrics and Retry-After", "[budget]") {
  BudgetTracker tracker;
  auto states = tracker.Bind(*Budgets("monthly_budget = 200"));
  int64_t t = Ms("2025-03-10T12:00:00Z");
  states[0]->Charge(50, t);
  states[1]->Charge(7, t);
  observability::PromWriter w;
  tracker.WriteMetrics(w, t);
  const std::string& text = w.text();
  CHECK(text.find("geogate_tenant_budget_used_ratio{tenant=\"acme\"} 0.25\n") != std::string::npos);
  CHECK(text.find("geogate_tenant_budget_spent_dollars{tenant=\"acme\"} 50\n") !=
        std::string::npos);
  CHECK(text.find("geogate_tenant_budget_dollars{tenant=\"acme\"} 200\n") != std::string::npos);
  CHECK(text.find("tenant=\"beta\"") == std::string::npos);  // no budget, no ratio

  CHECK(BudgetRetryAfterSeconds(Ms("2025-03-31T23:59:59Z")) == 1);
  CHECK(BudgetRetryAfterSeconds(Ms("2025-03-31T23:59:59.001Z")) == 1);
  CHECK(BudgetRetryAfterSeconds(Ms("2025-03-31T00:00:00Z")) == 86400);
}

}  // namespace
}  // namespace geogate::accounting
