// Small helpers shared by the routing unit tests.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "config/snapshot.h"
#include "routing/ip_addr.h"

namespace geogate::routing::testing {

/// Parses an address the test knows is valid.
inline IpAddr Ip(std::string_view text) {
  auto ip = IpAddr::Parse(text);
  INFO("address " << std::string(text));
  REQUIRE(ip.has_value());
  return *ip;
}

/// "10.0.0.0/8" or "fd00::/8" as the config loader stores it (IPv4 mapped,
/// prefix + 96).
inline config::Cidr Cidr(std::string_view text) {
  size_t slash = text.find('/');
  IpAddr ip = Ip(text.substr(0, slash));
  int len = ip.is_v4() ? 32 : 128;
  if (slash != std::string_view::npos) len = std::stoi(std::string(text.substr(slash + 1)));
  config::Cidr c;
  c.addr = ip.bytes;
  c.prefix_len = static_cast<uint8_t>(ip.is_v4() ? len + 96 : len);
  return c;
}

}  // namespace geogate::routing::testing
