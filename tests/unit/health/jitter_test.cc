#include "health/jitter.h"

#include <random>

#include <catch2/catch.hpp>

#include "health/ewma.h"

using geogate::health::InitialDelay;
using geogate::health::JitteredInterval;
using geogate::health::Millis;

TEST_CASE("jitter: initial delay is uniform-ish from 0 to below the interval", "[health][jitter]") {
  std::mt19937_64 rng(42);
  const Millis interval(100);
  int buckets[10] = {};
  for (int i = 0; i < 100000; ++i) {
    const Millis d = InitialDelay(interval, rng());
    REQUIRE(d >= Millis(0));
    REQUIRE(d < interval);
    ++buckets[d.count() / 10];
  }
  // Each tenth of the interval gets about a tenth of the draws.
  for (int b : buckets)
    CHECK((b > 9000 && b < 11000));
  CHECK(InitialDelay(Millis(0), 12345) == Millis(0));
  CHECK(InitialDelay(Millis(100), UINT64_MAX) < Millis(100));
}

TEST_CASE("jitter: interval stays within +-jitter_percent", "[health][jitter]") {
  std::mt19937_64 rng(7);
  for (uint32_t percent : {0u, 1u, 10u, 50u, 100u, 250u}) {
    for (int64_t base : {1, 50, 100, 1000, 30000}) {
      const int64_t spread = base * std::min<uint32_t>(percent, 100) / 100;
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (int i = 0; i < 5000; ++i) {
        const int64_t w = JitteredInterval(Millis(base), percent, rng()).count();
        REQUIRE(w >= std::max<int64_t>(1, base - spread));
        REQUIRE(w <= base + spread);
        lo = std::min(lo, w);
        hi = std::max(hi, w);
      }
      if (spread >= 2) {
        // Both ends are reached: the jitter really spreads.
        CHECK(lo <= base - spread + spread / 2);
        CHECK(hi >= base + spread - spread / 2);
      }
    }
  }
}

TEST_CASE("jitter: never zero so a zero interval cannot spin", "[health][jitter]") {
  CHECK(JitteredInterval(Millis(0), 10, 99) == Millis(1));
  CHECK(JitteredInterval(Millis(-5), 10, 99) == Millis(1));
  CHECK(JitteredInterval(Millis(1), 100, 0) == Millis(1));
}

TEST_CASE("ewma: first sample is taken as is and then weighted by alpha", "[health][ewma]") {
  using geogate::health::EwmaNext;
  CHECK(EwmaNext(-1, 10000, 0.3) == 10000);
  CHECK(EwmaNext(10000, 20000, 0.3) == 13000);
  CHECK(EwmaNext(10000, 20000, 1.0) == 20000);
  CHECK(EwmaNext(10000, 20000, 0.0) == 10000);
  std::atomic<int64_t> avg{-1};
  geogate::health::EwmaUpdate(avg, 100, 0.5);
  geogate::health::EwmaUpdate(avg, 200, 0.5);
  CHECK(avg.load() == 150);
}
