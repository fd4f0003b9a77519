#include <catch2/catch.hpp>

#include "proxy/relay_parse.h"

using geogate::proxy::RelayReadSize;

namespace {
constexpr size_t kFull = 16384;
constexpr size_t kTrickle = 512;
}  // namespace

TEST_CASE("relay read size: a stream starts trickling and stays while tokens come one by one",
          "[relay]") {
  RelayReadSize s(kFull, kTrickle);
  CHECK(s.trickling());
  CHECK(s.next() == kTrickle);
  for (int i = 0; i < 100; ++i) {
    s.Read(200);
    CHECK(s.next() == kTrickle);
  }
}

TEST_CASE("relay read size: a full trickle read switches to full reads", "[relay]") {
  RelayReadSize s(kFull, kTrickle);
  s.Read(kTrickle);
  CHECK_FALSE(s.trickling());
  CHECK(s.next() == kFull);

  SECTION("it trickles again only after kSmallReadsToTrickle small reads in a row") {
    for (uint32_t i = 1; i < RelayReadSize::kSmallReadsToTrickle; ++i) {
      s.Read(kTrickle - 1);
      CHECK(s.next() == kFull);
    }
    s.Read(kTrickle - 1);
    CHECK(s.next() == kTrickle);
  }
  SECTION("a large read among small ones starts the count again") {
    for (uint32_t i = 1; i < RelayReadSize::kSmallReadsToTrickle; ++i)
      s.Read(100);
    s.Read(3000);
    for (uint32_t i = 1; i < RelayReadSize::kSmallReadsToTrickle; ++i) {
      s.Read(100);
      CHECK(s.next() == kFull);
    }
    s.Read(100);
    CHECK(s.next() == kTrickle);
  }
  SECTION("reads that alternate between a backlog and a token never trickle") {
    for (int i = 0; i < 100; ++i) {
      s.Read(i % 2 == 0 ? 150 : 2000);
      CHECK(s.next() == kFull);
    }
  }
}

TEST_CASE("relay read size: an empty read (end of stream) counts as small", "[relay]") {
  RelayReadSize s(kFull, kTrickle);
  s.Read(kFull);
  for (uint32_t i = 0; i < RelayReadSize::kSmallReadsToTrickle; ++i)
    s.Read(0);
  CHECK(s.trickling());
}
