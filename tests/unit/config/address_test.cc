// host:port, CIDR and backend URL parsing (config/address.h).
#include <catch2/catch.hpp>

#include "config/address.h"

namespace geogate::config {
namespace {

std::array<uint8_t, 16> V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

std::string Message(const absl::Status& s) {
  return std::string(s.message());
}

TEST_CASE("ParseHostPort accepts numeric v4 and bracketed v6", "[config][address]") {
  auto a = ParseHostPort("0.0.0.0:8080", false);
  REQUIRE(a.ok());
  CHECK(a->host == "0.0.0.0");
  CHECK(a->port == 8080);

  auto b = ParseHostPort("[::]:8443", false);
  REQUIRE(b.ok());
  CHECK(b->host == "::");
  CHECK(b->port == 8443);

  auto c = ParseHostPort("[2001:0db8:0:0::1]:65535", false);
  REQUIRE(c.ok());
  CHECK(c->host == "2001:db8::1");  // canonical form
  CHECK(c->port == 65535);

  auto zero = ParseHostPort("127.0.0.1:0", true);
  REQUIRE(zero.ok());
  CHECK(zero->port == 0);
}

TEST_CASE("ParseHostPort refuses names, missing ports and junk", "[config][address]") {
  CHECK_THAT(Message(ParseHostPort("localhost:80", true).status()),
             Catch::Matchers::Contains("'localhost' is not a numeric IPv4 address"));
  CHECK_THAT(Message(ParseHostPort("127.0.0.1", true).status()),
             Catch::Matchers::Contains("needs a port"));
  CHECK_THAT(Message(ParseHostPort("127.0.0.1:", true).status()),
             Catch::Matchers::Contains("port '' is not a number"));
  CHECK_THAT(Message(ParseHostPort("::1:80", true).status()),
             Catch::Matchers::Contains("must be in brackets"));
  CHECK_THAT(Message(ParseHostPort("[::1:80", true).status()),
             Catch::Matchers::Contains("no closing ']'"));
  CHECK_THAT(Message(ParseHostPort("[::1]", true).status()),
             Catch::Matchers::Contains("needs a port"));
  CHECK_THAT(Message(ParseHostPort("[fe80::1%eth0]:80", true).status()),
             Catch::Matchers::Contains("is not a numeric IPv6 address"));
  CHECK_THAT(Message(ParseHostPort("[1.2.3.4]:80", true).status()),
             Catch::Matchers::Contains("is not a numeric IPv6 address"));
  CHECK_THAT(Message(ParseHostPort("1.2.3.4:99999", true).status()),
             Catch::Matchers::Contains("from 0 to 65535"));
  CHECK_THAT(Message(ParseHostPort("1.2.3.4:-1", true).status()),
             Catch::Matchers::Contains("is not a number"));
  CHECK_THAT(Message(ParseHostPort("1.2.3.4:0", false).status()),
             Catch::Matchers::Contains("port 0 is not allowed"));
  CHECK_FALSE(ParseHostPort("", true).ok());
  CHECK_FALSE(ParseHostPort(":80", true).ok());
  CHECK_FALSE(ParseHostPort("1.2.3:80", true).ok());
  CHECK_FALSE(ParseHostPort("1.2.3.4:8 0", true).ok());
}

TEST_CASE("ParseCidr: IPv4 is stored IPv4-mapped with prefix + 96", "[config][address]") {
  auto c = ParseCidr("10.0.0.0/8");
  REQUIRE(c.ok());
  CHECK(c->addr == V4(10, 0, 0, 0));
  CHECK(c->prefix_len == 104);
  CHECK(c->contains(V4(10, 200, 3, 4)));
  CHECK_FALSE(c->contains(V4(11, 0, 0, 1)));

  auto bare = ParseCidr("192.0.2.7");
  REQUIRE(bare.ok());
  CHECK(bare->prefix_len == 128);
  CHECK(bare->contains(V4(192, 0, 2, 7)));
  CHECK_FALSE(bare->contains(V4(192, 0, 2, 8)));

  auto all = ParseCidr("0.0.0.0/0");
  REQUIRE(all.ok());
  CHECK(all->prefix_len == 96);
  CHECK(all->contains(V4(8, 8, 8, 8)));
  // /0 over IPv4 still means IPv4 only.
  std::array<uint8_t, 16> v6{0x20, 0x01, 0x0d, 0xb8};
  CHECK_FALSE(all->contains(v6));
}

TEST_CASE("ParseCidr: IPv6", "[config][address]") {
  auto c = ParseCidr("2001:db8::/32");
  REQUIRE(c.ok());
  CHECK(c->prefix_len == 32);
  std::array<uint8_t, 16> inside{0x20, 0x01, 0x0d, 0xb8, 0, 1};
  std::array<uint8_t, 16> outside{0x20, 0x01, 0x0d, 0xb9};
  CHECK(c->contains(inside));
  CHECK_FALSE(c->contains(outside));

  auto bare = ParseCidr("::1");
  REQUIRE(bare.ok());
  CHECK(bare->prefix_len == 128);

  auto odd = ParseCidr("fe80::/10");
  REQUIRE(odd.ok());
  std::array<uint8_t, 16> link_local{0xfe, 0xbf};
  CHECK(odd->contains(link_local));
}

TEST_CASE("ParseCidr refuses host bits, bad prefixes and names", "[config][address]") {
  CHECK(Message(ParseCidr("10.0.0.1/8").status()) ==
        "'10.0.0.1/8' has host bits set (did you mean '10.0.0.0/8'?)");
  CHECK(Message(ParseCidr("2001:db8::1/32").status()) ==
        "'2001:db8::1/32' has host bits set (did you mean '2001:db8::/32'?)");
  CHECK_THAT(Message(ParseCidr("10.0.0.0/33").status()), Catch::Matchers::Contains("from 0 to 32"));
  CHECK_THAT(Message(ParseCidr("::/129").status()), Catch::Matchers::Contains("from 0 to 128"));
  CHECK_THAT(Message(ParseCidr("10.0.0.0/").status()),
             Catch::Matchers::Contains("prefix length ''"));
  CHECK_THAT(Message(ParseCidr("10.0.0.0/x").status()),
             Catch::Matchers::Contains("prefix length 'x'"));
  CHECK_THAT(Message(ParseCidr("proxy.internal").status()),
             Catch::Matchers::Contains("is not an IPv4 address"));
  CHECK_THAT(Message(ParseCidr("zz::/8").status()),
             Catch::Matchers::Contains("is not an IPv6 address"));
  CHECK_FALSE(ParseCidr("").ok());
}

TEST_CASE("ParseBackendUrl: scheme, host, default ports, base path", "[config][address]") {
  auto a = ParseBackendUrl("http://10.0.1.10:8000");
  REQUIRE(a.ok());
  CHECK_FALSE(a->tls);
  CHECK(a->host == "10.0.1.10");
  CHECK(a->port == 8000);
  CHECK(a->base_path.empty());

  auto b = ParseBackendUrl("https://GPU.Example.com/v1/");
  REQUIRE(b.ok());
  CHECK(b->tls);
  CHECK(b->host == "gpu.example.com");
  CHECK(b->port == 443);
  CHECK(b->base_path == "/v1");

  auto c = ParseBackendUrl("http://h/");
  REQUIRE(c.ok());
  CHECK(c->port == 80);
  CHECK(c->base_path.empty());

  auto d = ParseBackendUrl("HTTPS://[2001:db8::10]:9443/a/b//");
  REQUIRE(d.ok());
  CHECK(d->tls);
  CHECK(d->host == "2001:db8::10");
  CHECK(d->port == 9443);
  CHECK(d->base_path == "/a/b");

  auto e = ParseBackendUrl("http://h/with%20space");
  REQUIRE(e.ok());
  CHECK(e->base_path == "/with%20space");
}

TEST_CASE("ParseBackendUrl refuses what cannot be an upstream base", "[config][address]") {
  CHECK_THAT(Message(ParseBackendUrl("ftp://h").status()),
             Catch::Matchers::Contains("scheme 'ftp' is not supported"));
  CHECK_THAT(Message(ParseBackendUrl("h:8000").status()),
             Catch::Matchers::Contains("needs a scheme"));
  CHECK_THAT(Message(ParseBackendUrl("http:///x").status()), Catch::Matchers::Contains("no host"));
  CHECK_THAT(Message(ParseBackendUrl("http://u:p@h").status()),
             Catch::Matchers::Contains("user information"));
  CHECK_THAT(Message(ParseBackendUrl("http://h?a=1").status()), Catch::Matchers::Contains("query"));
  CHECK_THAT(Message(ParseBackendUrl("http://h#f").status()),
             Catch::Matchers::Contains("fragment"));
  CHECK_THAT(Message(ParseBackendUrl("http://h:0").status()),
             Catch::Matchers::Contains("from 1 to 65535"));
  CHECK_THAT(Message(ParseBackendUrl("http://h:70000").status()),
             Catch::Matchers::Contains("from 1 to 65535"));
  CHECK_THAT(Message(ParseBackendUrl("http://h:/").status()),
             Catch::Matchers::Contains("URL port ''"));
  CHECK_THAT(Message(ParseBackendUrl("http://h h/").status()),
             Catch::Matchers::Contains("is not a valid URL"));
}

}  // namespace
}  // namespace geogate::config
