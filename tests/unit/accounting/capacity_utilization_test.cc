// Time-weighted utilisation windows in simulated time: constant load, step
// changes, irregular sampling with gaps, and backends coming and going.
#include <catch2/catch.hpp>

#include "accounting/capacity_utilization.h"
#include "testing/simulated_time.h"

namespace geogate::accounting {
namespace {

using health::Millis;

struct Fixture {
  health::SimulatedTime clock;
  UtilizationTracker util{Millis(3000)};

  void SampleOne(const std::string& key, uint32_t inflight, uint32_t capacity = 64,
                 bool routable = true) {
    util.Sample(clock.monotonic(), {UtilizationSample{key, inflight, capacity, routable}});
  }
  /// One sample a second for `seconds`, the first one second from now.
  void Run(const std::string& key, int seconds, uint32_t inflight, uint32_t capacity = 64) {
    for (int i = 0; i < seconds; ++i) {
      clock.advance(Millis(1000));
      SampleOne(key, inflight, capacity);
    }
  }
  BackendUsage Usage(const std::string& key, UtilWindow w) {
    return util.Usage(key, w, clock.monotonic());
  }
};

TEST_CASE("constant load gives the exact ratio in every window", "[capacity][utilization]") {
  Fixture f;
  f.SampleOne("b", 32);  // the first sample only starts the series
  f.Run("b", 20 * 60, 32);
  for (UtilWindow w : {UtilWindow::k1m, UtilWindow::k5m, UtilWindow::k15m}) {
    BackendUsage u = f.Usage("b", w);
    CHECK(u.covered_seconds == Approx(UtilWindowLength(w).count()));
    CHECK(u.utilization() == Approx(0.5));
    CHECK(u.mean_inflight() == Approx(32));
    CHECK(u.offered_seconds == Approx(u.capacity_seconds));
  }
}

TEST_CASE("a step change is weighted by time in each window", "[capacity][utilization]") {
  Fixture f;
  f.SampleOne("b", 0);
  f.Run("b", 600, 0);   // ten idle minutes
  f.Run("b", 120, 64);  // then two full ones
  CHECK(f.Usage("b", UtilWindow::k1m).utilization() == Approx(1.0));
  CHECK(f.Usage("b", UtilWindow::k5m).utilization() == Approx(2.0 / 5));
  // Only twelve minutes were ever observed: the 15-minute window averages those.
  BackendUsage u15 = f.Usage("b", UtilWindow::k15m);
  CHECK(u15.covered_seconds == Approx(720));
  CHECK(u15.utilization() == Approx(120.0 / 720));
  CHECK(u15.mean_inflight() == Approx(64.0 * 120 / 720));
}

TEST_CASE("irregular samples stand for their interval, gaps beyond max_gap do not count",
          "[capacity][utilization]") {
  Fixture f;
  f.SampleOne("b", 10, 100);
  f.clock.advance(Millis(500));
  f.SampleOne("b", 10, 100);  // (0, 0.5] at 10
  f.clock.advance(Millis(2500));
  f.SampleOne("b", 20, 100);  // (0.5, 3] at 20
  f.clock.advance(Millis(200));
  f.SampleOne("b", 20, 100);  // (3, 3.2] at 20
  f.clock.advance(Millis(6800));
  f.SampleOne("b", 40, 100);  // a 6.8 s stall: only (7, 10] at 40 counts
  BackendUsage u = f.Usage("b", UtilWindow::k1m);
  CHECK(u.covered_seconds == Approx(6.2));
  CHECK(u.inflight_seconds == Approx(5 + 50 + 4 + 120));
  CHECK(u.mean_inflight() == Approx(179 / 6.2));
  CHECK(u.utilization() == Approx(179.0 / 620));

  // set_sample_interval widens the gap a sample may stand for (3x).
  f.util.set_sample_interval(Millis(5000));
  f.clock.advance(Millis(12000));
  f.SampleOne("b", 0, 100);
  CHECK(f.Usage("b", UtilWindow::k1m).covered_seconds == Approx(6.2 + 12));
}

TEST_CASE("the window clips segments at its start", "[capacity][utilization]") {
  Fixture f;
  f.SampleOne("b", 64);
  f.clock.advance(Millis(50 * 1000));
  f.SampleOne("b", 64);                            // stands for max_gap only: (47, 50]
  f.Run("b", 59, 0);                               // (50, 109] idle
  BackendUsage u = f.Usage("b", UtilWindow::k1m);  // (49, 109]
  CHECK(u.covered_seconds == Approx(60));
  CHECK(u.inflight_seconds == Approx(64));
}

TEST_CASE("routable time alone offers capacity", "[capacity][utilization]") {
  Fixture f;
  f.SampleOne("b", 0);
  for (int i = 0; i < 60; ++i) {
    f.clock.advance(Millis(1000));
    f.SampleOne("b", 16, 64, /*routable=*/i < 30);
  }
  BackendUsage u = f.Usage("b", UtilWindow::k1m);
  CHECK(u.capacity_seconds == Approx(64 * 60));
  CHECK(u.offered_seconds == Approx(64 * 30));
}

TEST_CASE("backends that leave age out and are forgotten, new ones start fresh",
          "[capacity][utilization]") {
  Fixture f;
  f.SampleOne("old", 8);
  f.Run("old", 300, 8);
  f.SampleOne("new", 4);
  CHECK(f.util.tracked() == 2);
  CHECK_FALSE(f.Usage("new", UtilWindow::k1m).has_data());
  f.Run("new", 120, 4);
  CHECK(f.Usage("new", UtilWindow::k1m).mean_inflight() == Approx(4));
  // "old" is no longer sampled: its last five minutes slide out of the windows.
  CHECK_FALSE(f.Usage("old", UtilWindow::k1m).has_data());
  CHECK(f.Usage("old", UtilWindow::k5m).covered_seconds == Approx(180));
  f.Run("new", 15 * 60, 4);
  CHECK(f.util.tracked() == 1);
  CHECK_FALSE(f.Usage("old", UtilWindow::k15m).has_data());
  CHECK_FALSE(f.Usage("never", UtilWindow::k15m).has_data());
}

}  // namespace
}  // namespace geogate::accounting
