#include <catch2/catch.hpp>

#include <string>

#include "routing/client_ip.h"
#include "routing_test_util.h"

using geogate::config::ClientIpSource;
using geogate::config::Geo;
using geogate::routing::IpAddr;
using geogate::routing::IsTrusted;
using geogate::routing::ResolveClientIp;
using geogate::routing::testing::Cidr;
using geogate::routing::testing::Ip;

namespace {

Geo XffGeo() {
  Geo geo;
  geo.client_ip = ClientIpSource::kXForwardedFor;
  geo.trusted_proxies = {Cidr("127.0.0.0/8"), Cidr("10.0.0.0/8"), Cidr("fd00::/8")};
  return geo;
}

std::string Resolve(const Geo& geo, const char* peer, std::string_view xff,
                    std::optional<IpAddr> proxy = std::nullopt) {
  return ResolveClientIp(geo, Ip(peer), xff, proxy).ToString();
}

}  // namespace

TEST_CASE("IsTrusted matches IPv4 and IPv6 prefixes", "[client_ip]") {
  auto trusted = XffGeo().trusted_proxies;
  CHECK(IsTrusted(trusted, Ip("10.1.2.3")));
  CHECK(IsTrusted(trusted, Ip("127.0.0.1")));
  CHECK(IsTrusted(trusted, Ip("::ffff:10.1.2.3")));
  CHECK(IsTrusted(trusted, Ip("fd12:3456::1")));
  CHECK_FALSE(IsTrusted(trusted, Ip("11.0.0.1")));
  CHECK_FALSE(IsTrusted(trusted, Ip("192.0.2.1")));
  CHECK_FALSE(IsTrusted(trusted, Ip("fe80::1")));
  // An IPv4 prefix never matches an IPv6 address outside ::ffff:0:0/96.
  CHECK_FALSE(IsTrusted(trusted, Ip("::10.1.2.3")));
  CHECK_FALSE(IsTrusted({}, Ip("10.1.2.3")));

  CHECK(IsTrusted({Cidr("0.0.0.0/0")}, Ip("203.0.113.9")));
  CHECK_FALSE(IsTrusted({Cidr("0.0.0.0/0")}, Ip("2001:db8::1")));
  CHECK(IsTrusted({Cidr("::/0")}, Ip("2001:db8::1")));
  CHECK(IsTrusted({Cidr("::/0")}, Ip("203.0.113.9")));
  CHECK(IsTrusted({Cidr("192.0.2.7")}, Ip("192.0.2.7")));
  CHECK_FALSE(IsTrusted({Cidr("192.0.2.7")}, Ip("192.0.2.6")));
  CHECK(IsTrusted({Cidr("192.0.2.0/25")}, Ip("192.0.2.127")));
  CHECK_FALSE(IsTrusted({Cidr("192.0.2.0/25")}, Ip("192.0.2.128")));
}

TEST_CASE("XFF: the right-most untrusted entry is the client", "[client_ip]") {
  Geo geo = XffGeo();
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, 10.0.0.2") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, 10.0.0.2, 127.0.0.1") == "203.0.113.7");
  // A client prepending addresses cannot move itself: the entry our own
  // proxy appended (the right-most untrusted one) wins.
  CHECK(Resolve(geo, "10.0.0.1", "192.0.2.1, 198.51.100.1, 203.0.113.7") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "192.0.2.1, 203.0.113.7, 10.0.0.2") == "203.0.113.7");
}

TEST_CASE("XFF is ignored unless the peer is trusted", "[client_ip]") {
  Geo geo = XffGeo();
  CHECK(Resolve(geo, "198.51.100.9", "203.0.113.7") == "198.51.100.9");
  CHECK(Resolve(geo, "198.51.100.9", "10.0.0.5") == "198.51.100.9");
  CHECK(Resolve(geo, "2001:db8::9", "203.0.113.7") == "2001:db8::9");
  geo.trusted_proxies.clear();
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7") == "10.0.0.1");
}

TEST_CASE("XFF: when every entry is trusted the left-most one is the client", "[client_ip]") {
  Geo geo = XffGeo();
  CHECK(Resolve(geo, "10.0.0.1", "10.0.0.5, 10.0.0.6") == "10.0.0.5");
  CHECK(Resolve(geo, "10.0.0.1", "10.0.0.5") == "10.0.0.5");
  CHECK(Resolve(geo, "10.0.0.1", "garbage, 10.0.0.5, junk, 127.0.0.9") == "10.0.0.5");
  CHECK(Resolve(geo, "10.0.0.1", "fd00::5, 10.0.0.6") == "fd00::5");
}

TEST_CASE("XFF: no usable entry leaves the peer", "[client_ip]") {
  Geo geo = XffGeo();
  CHECK(Resolve(geo, "10.0.0.1", "") == "10.0.0.1");
  CHECK(Resolve(geo, "10.0.0.1", " ") == "10.0.0.1");
  CHECK(Resolve(geo, "10.0.0.1", ",,,") == "10.0.0.1");
  CHECK(Resolve(geo, "10.0.0.1", "unknown") == "10.0.0.1");
  CHECK(Resolve(geo, "10.0.0.1", "garbage, _hidden, unknown") == "10.0.0.1");
}

TEST_CASE("XFF: malformed and over-long entries are skipped", "[client_ip]") {
  Geo geo = XffGeo();
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, not-an-ip, 10.0.0.2") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, 198.51.100.300") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, 198.51.100.3:99999") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, 198.51.100.3:") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, 198.51.100.3:http") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, [198.51.100.3]") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, [2001:db8::1]x") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, [2001:db8::1") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, fe80::1%eth0") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, 198.51.100.3 198.51.100.4") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, \"198.51.100.3\"") == "203.0.113.7");
  std::string huge = "203.0.113.7, " + std::string(5000, '1') + ", " + std::string(300, ':');
  CHECK(Resolve(geo, "10.0.0.1", huge) == "203.0.113.7");
  std::string long_v6 = "203.0.113.7, [ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:655350";
  CHECK(Resolve(geo, "10.0.0.1", long_v6) == "203.0.113.7");
  // Binary junk, NULs included.
  const char raw[] = "203.0.113.7,\0\xff\x01,\r\n";
  std::string junk(raw, sizeof raw - 1);
  CHECK(Resolve(geo, "10.0.0.1", junk) == "203.0.113.7");
}

TEST_CASE("XFF: entries may carry ports and brackets", "[client_ip]") {
  Geo geo = XffGeo();
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7:8080") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7:0, 10.0.0.2:443") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "[2001:db8::1]:443") == "2001:db8::1");
  CHECK(Resolve(geo, "10.0.0.1", "[2001:db8::1]") == "2001:db8::1");
  CHECK(Resolve(geo, "10.0.0.1", "2001:db8::1") == "2001:db8::1");
  CHECK(Resolve(geo, "10.0.0.1", "[::1], [fd00::2]:80") == "::1");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7, [fd00::2]:80, 10.0.0.3:1") == "203.0.113.7");
}

TEST_CASE("XFF: whitespace around commas is ignored", "[client_ip]") {
  Geo geo = XffGeo();
  CHECK(Resolve(geo, "10.0.0.1", " 203.0.113.7 ,\t10.0.0.2 ") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7,10.0.0.2") == "203.0.113.7");
  CHECK(Resolve(geo, "10.0.0.1", "\t203.0.113.7\t") == "203.0.113.7");
  // Two headers joined with "," by the caller, one of them empty.
  CHECK(Resolve(geo, "10.0.0.1", "198.51.100.1, 203.0.113.7,") == "203.0.113.7");
}

TEST_CASE("XFF: IPv6 and IPv4-mapped entries", "[client_ip]") {
  Geo geo = XffGeo();
  CHECK(Resolve(geo, "fd00::1", "2001:db8:49::5") == "2001:db8:49::5");
  CHECK(Resolve(geo, "::ffff:10.0.0.1", "203.0.113.7") == "203.0.113.7");
  IpAddr client = ResolveClientIp(geo, Ip("10.0.0.1"), "::ffff:203.0.113.7", std::nullopt);
  CHECK(client.is_v4());
  CHECK(client == Ip("203.0.113.7"));
  // A trusted proxy written v4-mapped is still trusted.
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.9, ::ffff:10.0.0.2") == "203.0.113.9");
  CHECK(Resolve(geo, "10.0.0.1", "[::ffff:203.0.113.9]:80, 10.0.0.2") == "203.0.113.9");
}

TEST_CASE("peer mode ignores XFF and the PROXY source", "[client_ip]") {
  Geo geo = XffGeo();
  geo.client_ip = ClientIpSource::kPeer;
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7") == "10.0.0.1");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7", Ip("198.51.100.1")) == "10.0.0.1");
}

TEST_CASE("proxy-protocol mode uses the PROXY source and ignores XFF", "[client_ip]") {
  Geo geo = XffGeo();
  geo.client_ip = ClientIpSource::kProxyProtocol;
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7", Ip("198.51.100.1")) == "198.51.100.1");
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7", Ip("2001:db8:1::1")) == "2001:db8:1::1");
  // No PROXY source (LOCAL / UNKNOWN header): the peer, still not XFF.
  CHECK(Resolve(geo, "10.0.0.1", "203.0.113.7") == "10.0.0.1");
}
