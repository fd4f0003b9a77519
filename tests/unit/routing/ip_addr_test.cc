#include <catch2/catch.hpp>

#include "routing/ip_addr.h"
#include "routing_test_util.h"

using geogate::routing::IpAddr;
using geogate::routing::testing::Ip;

TEST_CASE("IpAddr parses IPv4 into the v4-mapped form", "[ip_addr]") {
  IpAddr a = Ip("192.0.2.1");
  CHECK(a.is_v4());
  CHECK(a.v4() == 0xC0000201u);
  std::array<uint8_t, 16> want = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1};
  CHECK(a.bytes == want);
  CHECK(a.ToString() == "192.0.2.1");
  CHECK(Ip("0.0.0.0").ToString() == "0.0.0.0");
  CHECK(Ip("255.255.255.255").ToString() == "255.255.255.255");
  CHECK(Ip("10.20.0.7").ToString() == "10.20.0.7");
  CHECK(Ip("255.255.255.255").v4() == 0xFFFFFFFFu);
}

TEST_CASE("IpAddr parses IPv6 and formats it per RFC 5952", "[ip_addr]") {
  CHECK_FALSE(Ip("2001:db8::1").is_v4());
  CHECK(Ip("2001:db8::1").ToString() == "2001:db8::1");
  CHECK(Ip("2001:0DB8:0000:0000:0000:0000:0000:0001").ToString() == "2001:db8::1");
  CHECK(Ip("::1").ToString() == "::1");
  CHECK(Ip("::").ToString() == "::");
  // The longest run of zeros is compressed; the first when tied; a single
  // zero group is not compressed.
  CHECK(Ip("2001:db8:0:0:1:0:0:1").ToString() == "2001:db8::1:0:0:1");
  CHECK(Ip("2001:0:0:1:0:0:0:1").ToString() == "2001:0:0:1::1");
  CHECK(Ip("2001:db8:0:1:1:1:1:1").ToString() == "2001:db8:0:1:1:1:1:1");
}

TEST_CASE("IpAddr normalises IPv4-mapped IPv6 to IPv4", "[ip_addr]") {
  IpAddr mapped = Ip("::ffff:192.0.2.1");
  CHECK(mapped.is_v4());
  CHECK(mapped == Ip("192.0.2.1"));
  CHECK(mapped.ToString() == "192.0.2.1");
  CHECK(Ip("::FFFF:c000:0201") == Ip("192.0.2.1"));

  std::array<uint8_t, 16> b = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 1, 2, 3};
  IpAddr from6 = IpAddr::FromV6(b);
  CHECK(from6.is_v4());
  CHECK(from6 == IpAddr::FromV4(0x0A010203u));
  CHECK(from6.ToString() == "10.1.2.3");
  // IPv4-compatible (::a.b.c.d, deprecated) is not IPv4-mapped.
  CHECK_FALSE(Ip("::192.0.2.1").is_v4());
}

TEST_CASE("IpAddr rejects everything that is not a bare address", "[ip_addr]") {
  for (const char* bad : {"",
                          " ",
                          "1.2.3",
                          "1.2.3.4.5",
                          "256.1.1.1",
                          "1.2.3.4 ",
                          " 1.2.3.4",
                          "01.2.3.4",
                          "1.2.3.-4",
                          "0x7f.0.0.1",
                          "1.2.3.4:80",
                          "[::1]",
                          "[::1]:80",
                          "fe80::1%eth0",
                          "2001:db8:::1",
                          "2001:db8::1::2",
                          "12345::",
                          "::g",
                          "localhost",
                          "unknown",
                          "1.2.3.4/24",
                          "0000:0000:0000:0000:0000:ffff:255.255.255.255:1"}) {
    INFO("input '" << bad << "'");
    CHECK_FALSE(IpAddr::Parse(bad).has_value());
  }
  std::string long_input(200, '1');
  CHECK_FALSE(IpAddr::Parse(long_input).has_value());
  // Not NUL-terminated views are fine: only the view's bytes count.
  std::string_view prefix = std::string_view("10.0.0.12345").substr(0, 8);
  CHECK(IpAddr::Parse(prefix) == Ip("10.0.0.1"));
}

TEST_CASE("IpAddr round-trips through ToString", "[ip_addr]") {
  for (const char* text :
       {"192.0.2.1", "2001:db8::1", "::", "::1", "fe80::1:2:3:4", "2001:db8:0:1:1:1:1:1",
        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::192.0.2.1", "64:ff9b::c000:201"}) {
    INFO(text);
    IpAddr a = Ip(text);
    CHECK(Ip(a.ToString()) == a);
    // ToChars writes the same text into a caller's buffer.
    char buf[IpAddr::kMaxText];
    CHECK(std::string_view(buf, a.ToChars(buf)) == a.ToString());
  }
}
