#include "routing/ip_addr.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace geogate::routing {
namespace {

// Longest text inet_pton can accept: a full IPv6 address with an embedded
// IPv4 tail ("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", 45 characters).
constexpr size_t kMaxAddrText = INET6_ADDRSTRLEN - 1;

constexpr std::array<uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};

}  // namespace

std::optional<IpAddr> IpAddr::Parse(std::string_view text) {
  // inet_pton needs a NUL-terminated string; copy onto the stack so parsing
  // stays allocation-free (it runs per X-Forwarded-For entry).
  if (text.empty() || text.size() > kMaxAddrText) return std::nullopt;
  char buf[kMaxAddrText + 1];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';

  IpAddr out;
  if (text.find(':') == std::string_view::npos) {
    in_addr a4;
    if (inet_pton(AF_INET, buf, &a4) != 1) return std::nullopt;
    std::memcpy(out.bytes.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size());
    std::memcpy(out.bytes.data() + 12, &a4, 4);  // network order already
    return out;
  }
  // inet_pton(AF_INET6) rejects brackets, zones ("%eth0") and ports. A
  // v4-mapped input already has the canonical form, nothing to normalise.
  if (inet_pton(AF_INET6, buf, out.bytes.data()) != 1) return std::nullopt;
  return out;
}

IpAddr IpAddr::FromV4(uint32_t host_order) {
  IpAddr out;
  std::memcpy(out.bytes.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size());
  out.bytes[12] = static_cast<uint8_t>(host_order >> 24);
  out.bytes[13] = static_cast<uint8_t>(host_order >> 16);
  out.bytes[14] = static_cast<uint8_t>(host_order >> 8);
  out.bytes[15] = static_cast<uint8_t>(host_order);
  return out;
}

IpAddr IpAddr::FromV6(const std::array<uint8_t, 16>& b) {
  // The 16-byte form is the storage form: a v4-mapped input is the v4
  // address already, so there is nothing to rewrite.
  IpAddr out;
  out.bytes = b;
  return out;
}

bool IpAddr::is_v4() const {
  return std::memcmp(bytes.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size()) == 0;
}

uint32_t IpAddr::v4() const {
  return (uint32_t{bytes[12]} << 24) | (uint32_t{bytes[13]} << 16) | (uint32_t{bytes[14]} << 8) |
         uint32_t{bytes[15]};
}

size_t IpAddr::ToChars(std::span<char, kMaxText> out) const {
  if (is_v4()) {
    // Dotted quad with to_chars: glibc's inet_ntop formats IPv4 with
    // sprintf.
    char* p = out.data();
    char* const end = out.data() + out.size();
    for (int i = 0; i < 4; ++i) {
      // Never short (45 bytes fit "255.255.255.255"); the bound check keeps
      // GCC's -Wstringop-overflow from assuming to_chars ran out of room.
      if (i > 0 && p != end) *p++ = '.';
      p = std::to_chars(p, end, bytes[12 + i]).ptr;
    }
    return static_cast<size_t>(p - out.data());
  }
  char buf[INET6_ADDRSTRLEN];
  static_assert(sizeof buf == kMaxText + 1);
  // inet_ntop only fails on a short buffer, which INET6_ADDRSTRLEN rules out.
  if (inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf) == nullptr) return 0;
  const size_t n = std::strlen(buf);
  std::memcpy(out.data(), buf, n);
  return n;
}

std::string IpAddr::ToString() const {
  char buf[kMaxText];
  return std::string(buf, ToChars(buf));
}

}  // namespace geogate::routing
