// An IPv4 or IPv6 address as 16 bytes, IPv4 stored IPv4-mapped
// (::ffff:a.b.c.d) so one representation and one comparison serve both.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace geogate::routing {

struct IpAddr {
  std::array<uint8_t, 16> bytes{};

  /// Parses "1.2.3.4", "2001:db8::1", "::ffff:1.2.3.4" (normalised to v4).
  /// No brackets, no port, no zone: returns nullopt for anything else.
  static std::optional<IpAddr> Parse(std::string_view text);
  static IpAddr FromV4(uint32_t host_order);
  static IpAddr FromV6(const std::array<uint8_t, 16>& b);  // normalises v4-mapped

  bool is_v4() const;   // true for the IPv4-mapped form
  uint32_t v4() const;  // host order; only when is_v4()
  /// The most characters ToChars writes (INET6_ADDRSTRLEN less the NUL).
  static constexpr size_t kMaxText = 45;
  /// "1.2.3.4" for v4, RFC 5952 text for v6.
  std::string ToString() const;
  /// ToString's text written to `out` (no NUL). @return its length.
  size_t ToChars(std::span<char, kMaxText> out) const;
  bool operator==(const IpAddr&) const = default;
};

}  // namespace geogate::routing
