// When freed heap memory is handed back after a burst of connections, in
// simulated time.
#include "server/heap_trim.h"

#include <catch2/catch.hpp>

using namespace geogate::server;
using namespace std::chrono_literals;

TEST_CASE("a large fall from the peak trims once", "[heap_trim]") {
  HeapTrimPolicy p;
  auto t = HeapTrimPolicy::Clock::time_point{} + 1h;
  CHECK_FALSE(p.Observe(10, t));
  CHECK_FALSE(p.Observe(1000, t += 1s));  // the burst
  CHECK_FALSE(p.Observe(900, t += 1s));   // not down to half yet
  CHECK(p.Observe(20, t += 1s));          // it went: trim
  CHECK_FALSE(p.Observe(20, t += 1s));    // and not again for the same burst
  CHECK_FALSE(p.Observe(0, t += 20s));    // nothing new freed since
}

TEST_CASE("small falls never trim", "[heap_trim]") {
  HeapTrimPolicy p;
  auto t = HeapTrimPolicy::Clock::time_point{} + 1h;
  for (int i = 0; i < 100; ++i) {
    CHECK_FALSE(p.Observe(200, t += 1s));
    CHECK_FALSE(p.Observe(0, t += 1s));
  }
}

TEST_CASE("trims are at least kMinInterval apart", "[heap_trim]") {
  HeapTrimPolicy p;
  auto t = HeapTrimPolicy::Clock::time_point{} + 1h;
  p.Observe(600, t);
  CHECK(p.Observe(0, t += 1s));
  p.Observe(600, t += 1s);
  CHECK_FALSE(p.Observe(0, t += 1s));  // a second burst at once: wait
  CHECK(p.Observe(0, t += HeapTrimPolicy::kMinInterval));
}
