#include "common/splitmix64.h"

#include <catch2/catch.hpp>

namespace geogate {
namespace {

TEST_CASE("splitmix64 gives the reference outputs for seed 0", "[splitmix64]") {
  // The published first outputs of Vigna's splitmix64.c seeded with 0.
  uint64_t state = 0;
  CHECK(SplitMix64(state) == 0xe220a8397b1dcdafull);
  CHECK(SplitMix64(state) == 0x6e789e6aa1b965f4ull);
  CHECK(SplitMix64(state) == 0x06c45d188009454full);
  CHECK(state == 3 * 0x9e3779b97f4a7c15ull);
}

TEST_CASE("splitmix64 is usable at compile time", "[splitmix64]") {
  constexpr uint64_t first = [] {
    uint64_t s = 0;
    return SplitMix64(s);
  }();
  STATIC_REQUIRE(first == 0xe220a8397b1dcdafull);
}

}  // namespace
}  // namespace geogate
