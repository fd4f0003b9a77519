#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "routing/rate_limiter.h"

using geogate::routing::RateLimiter;

namespace {
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
}  // namespace

TEST_CASE("token bucket admits the burst at once then the rate", "[ratelimit]") {
  RateLimiter rl(10, 5);  // 10/s, burst 5
  int64_t t = 100 * kSec;
  for (int i = 0; i < 5; ++i) CHECK(rl.Acquire(t).allowed);
  auto refused = rl.Acquire(t);
  CHECK_FALSE(refused.allowed);
  CHECK(refused.retry_after_ns == 100 * kMs);  // one emission interval
  CHECK_FALSE(rl.Acquire(t + 99 * kMs).allowed);
  CHECK(rl.Acquire(t + 100 * kMs).allowed);
  // Steady state: one request per 100 ms passes, a second in the same slot does not.
  for (int i = 2; i < 50; ++i) {
    CHECK(rl.Acquire(t + i * 100 * kMs).allowed);
    CHECK_FALSE(rl.Acquire(t + i * 100 * kMs).allowed);
  }
}

TEST_CASE("an idle bucket refills up to the burst, not beyond", "[ratelimit]") {
  RateLimiter rl(2, 3);
  int64_t t = 5 * kSec;
  for (int i = 0; i < 3; ++i) REQUIRE(rl.Acquire(t).allowed);
  REQUIRE_FALSE(rl.Acquire(t).allowed);
  t += 3600 * kSec;  // idle for an hour
  int admitted = 0;
  while (rl.Acquire(t).allowed) ++admitted;
  CHECK(admitted == 3);
}

TEST_CASE("reconfiguring keeps the bucket's state", "[ratelimit]") {
  RateLimiter rl(1, 1);
  int64_t t = kSec;
  REQUIRE(rl.Acquire(t).allowed);
  REQUIRE_FALSE(rl.Acquire(t).allowed);
  rl.Configure(1000, 1);  // a reload raises the rate
  CHECK(rl.Acquire(t + 1 * kSec).allowed);
}

TEST_CASE("concurrent acquirers never exceed the burst", "[ratelimit]") {
  RateLimiter rl(1, 100);  // 100 at once, then 1/s
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int j = 0; j < 1000; ++j)
        if (rl.Acquire(kSec).allowed) admitted++;
    });
  for (auto& th : threads) th.join();
  CHECK(admitted.load() == 100);
}
