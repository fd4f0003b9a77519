#include "health/retry_budget.h"

#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using geogate::health::FailureReason;
using geogate::health::IsFreeReroute;
using geogate::health::RetryBudget;

TEST_CASE("retry budget: the minimum holds with few requests", "[health][retry]") {
  RetryBudget budget(20, 3);
  auto request = budget.StartRequest();
  std::vector<RetryBudget::RetryGuard> held;
  for (int i = 0; i < 3; ++i) {
    auto g = budget.TryRetry();
    REQUIRE(g);
    held.push_back(std::move(g));
  }
  CHECK_FALSE(budget.TryRetry());
  CHECK(budget.rejected_retries() == 1);
  CHECK(budget.active_retries() == 3);
  held.pop_back();  // a retry finishes: its slot is free again
  CHECK(budget.active_retries() == 2);
  CHECK(budget.TryRetry());
}

TEST_CASE("retry budget: a percentage of active requests", "[health][retry]") {
  RetryBudget budget(20, 3);
  std::vector<RetryBudget::RequestGuard> requests;
  for (int i = 0; i < 100; ++i)
    requests.push_back(budget.StartRequest());
  CHECK(budget.active_requests() == 100);
  CHECK(budget.limit() == 20);
  std::vector<RetryBudget::RetryGuard> retries;
  for (int i = 0; i < 20; ++i)
    retries.push_back(budget.TryRetry());
  for (auto& r : retries)
    CHECK(r);
  CHECK_FALSE(budget.TryRetry());
  // Fewer requests, smaller budget (never below the minimum).
  requests.resize(10);
  CHECK(budget.limit() == 3);
  requests.clear();
  CHECK(budget.active_requests() == 0);
  // Reconfigure (reload).
  budget.configure(50, 0);
  for (int i = 0; i < 10; ++i)
    requests.push_back(budget.StartRequest());
  CHECK(budget.limit() == 5);
  geogate::config::Upstream upstream;
  budget.configure(upstream);
  CHECK(budget.limit() == 3);
}

TEST_CASE("retry budget: guards move and reset", "[health][retry]") {
  RetryBudget budget(0, 1);
  RetryBudget::RetryGuard a = budget.TryRetry();
  REQUIRE(a);
  RetryBudget::RetryGuard b = std::move(a);
  CHECK_FALSE(a);
  CHECK(b);
  CHECK(budget.active_retries() == 1);
  RetryBudget::RetryGuard c;
  c = std::move(b);
  CHECK(budget.active_retries() == 1);
  c.reset();
  CHECK(budget.active_retries() == 0);
  {
    auto r = budget.StartRequest();
    auto r2 = std::move(r);
    CHECK(budget.active_requests() == 1);
  }
  CHECK(budget.active_requests() == 0);
}

TEST_CASE("retry budget: concurrent workers never exceed the limit", "[health][retry]") {
  RetryBudget budget(0, 4);
  std::atomic<int> concurrent{0};
  std::atomic<int> worst{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        auto request = budget.StartRequest();
        if (auto retry = budget.TryRetry()) {
          const int now = concurrent.fetch_add(1) + 1;
          int seen = worst.load();
          while (now > seen && !worst.compare_exchange_weak(seen, now)) {
          }
          concurrent.fetch_sub(1);
        }
      }
    });
  }
  for (auto& t : workers)
    t.join();
  CHECK(worst.load() <= 4);
  CHECK(budget.active_retries() == 0);
  CHECK(budget.active_requests() == 0);
}

TEST_CASE("retry budget: reroutes after a backend failed without serving are free",
          "[health][retry]") {
  CHECK(IsFreeReroute(FailureReason::kConnectRefused));
  CHECK(IsFreeReroute(FailureReason::kReset));
  CHECK(IsFreeReroute(FailureReason::kProbeTimeout));
  // Signs of overload: retries would pile onto the rest of the pool.
  CHECK_FALSE(IsFreeReroute(FailureReason::kFirstTokenTimeout));
  CHECK_FALSE(IsFreeReroute(FailureReason::kUpstream5xx));
  CHECK_FALSE(IsFreeReroute(FailureReason::kConnectTimeout));
  CHECK_FALSE(IsFreeReroute(FailureReason::kTlsError));
  CHECK_FALSE(IsFreeReroute(FailureReason::kProtocolError));
}
