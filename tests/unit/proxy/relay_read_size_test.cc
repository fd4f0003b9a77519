#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include <boost/beast/core/buffers_to_string.hpp>

#include "proxy/relay_parse.h"

using geogate::proxy::kSmallReadsToTrickle;

namespace {
constexpr size_t kFull = 16384;
constexpr size_t kTrickle = 512;
using RelayReadSize = geogate::proxy::BasicRelayReadSize<kFull, kTrickle>;

boost::beast::flat_buffer BufferHolding(std::string_view bytes, size_t capacity) {
  boost::beast::flat_buffer buf;
  buf.reserve(capacity);
  buf.commit(boost::asio::buffer_copy(buf.prepare(bytes.size()), boost::asio::buffer(bytes)));
  return buf;
}
}  // namespace

TEST_CASE("relay read size: a stream starts trickling and stays while tokens come one by one",
          "[relay]") {
  RelayReadSize s;
  CHECK(s.trickling());
  CHECK(s.next() == kTrickle);
  for (int i = 0; i < 100; ++i) {
    s.Read(200);
    CHECK(s.next() == kTrickle);
  }
}

TEST_CASE("relay read size: a full trickle read switches to full reads", "[relay]") {
  RelayReadSize s;
  s.Read(kTrickle);
  CHECK_FALSE(s.trickling());
  CHECK(s.next() == kFull);

  SECTION("it trickles again only after kSmallReadsToTrickle small reads in a row") {
    for (uint32_t i = 1; i < kSmallReadsToTrickle; ++i) {
      s.Read(kTrickle - 1);
      CHECK(s.next() == kFull);
    }
    s.Read(kTrickle - 1);
    CHECK(s.next() == kTrickle);
  }
  SECTION("a large read among small ones starts the count again") {
    for (uint32_t i = 1; i < kSmallReadsToTrickle; ++i)
      s.Read(100);
    s.Read(3000);
    for (uint32_t i = 1; i < kSmallReadsToTrickle; ++i) {
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
  RelayReadSize s;
  s.Read(kFull);
  for (uint32_t i = 0; i < kSmallReadsToTrickle; ++i)
    s.Read(0);
  CHECK(s.trickling());
}

TEST_CASE("relay read size: a trickling stream waits with a small buffer", "[relay]") {
  RelayReadSize s;
  auto buf = BufferHolding("\r\n", kFull);

  SECTION("a full buffer is given back for one with room for a trickle read and what it holds") {
    s.ShrinkWhileTrickling(buf);
    CHECK(buf.capacity() >= 2 + kTrickle);
    CHECK(buf.capacity() < kFull);
    CHECK(boost::beast::buffers_to_string(buf.data()) == "\r\n");
  }
  SECTION("not while the stream reads full-size") {
    s.Read(kTrickle);
    s.ShrinkWhileTrickling(buf);
    CHECK(buf.capacity() >= kFull);
  }
  SECTION("not when it holds a trickle read's worth of bytes") {
    auto held = BufferHolding(std::string(kTrickle, 'x'), kFull);
    s.ShrinkWhileTrickling(held);
    CHECK(held.capacity() >= kFull);
    CHECK(held.size() == kTrickle);
  }
  SECTION("a buffer that is already small is kept") {
    auto small = BufferHolding("\r\n", kTrickle);
    const void* before = small.data().data();
    s.ShrinkWhileTrickling(small);
    CHECK(small.data().data() == before);
  }
}
