#include "routing/client_ip.h"

namespace geogate::routing {
namespace {

// Longest XFF entry worth parsing: "[" + 45-character IPv6 text + "]:65535".
// Anything longer is garbage and is skipped without looking at it further.
constexpr size_t kMaxEntry = 1 + 45 + 1 + 1 + 5;

bool IsSpace(char c) {
  return c == ' ' || c == '\t';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back()))
    s.remove_suffix(1);
  return s;
}

bool IsPort(std::string_view s) {
  if (s.empty() || s.size() > 5) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  return v <= 65535;
}

// One X-Forwarded-For entry: "1.2.3.4", "1.2.3.4:80", "2001:db8::1",
// "[2001:db8::1]", "[2001:db8::1]:443". Anything else (names, "unknown",
// RFC 7239 obfuscated identifiers, zones, bad ports) is nullopt.
std::optional<IpAddr> ParseEntry(std::string_view e) {
  if (e.empty() || e.size() > kMaxEntry) return std::nullopt;
  if (e.front() == '[') {
    size_t close = e.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view rest = e.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && IsPort(rest.substr(1)))) return std::nullopt;
    std::string_view host = e.substr(1, close - 1);
    // Brackets only make sense around IPv6; "[1.2.3.4]" is not a valid form.
    if (host.find(':') == std::string_view::npos) return std::nullopt;
    return IpAddr::Parse(host);
  }
  size_t colon = e.find(':');
  if (colon != std::string_view::npos && e.find(':', colon + 1) == std::string_view::npos) {
    // Exactly one colon: IPv4 with a port. (IPv6 always has two or more.)
    if (!IsPort(e.substr(colon + 1))) return std::nullopt;
    auto ip = IpAddr::Parse(e.substr(0, colon));
    if (!ip || !ip->is_v4()) return std::nullopt;
    return ip;
  }
  return IpAddr::Parse(e);
}

IpAddr ResolveXff(const config::Geo& geo, const IpAddr& peer, std::string_view xff) {
  // XFF is only as trustworthy as whoever appended to it: a client talking to
  // us directly can write anything there.
  if (!IsTrusted(geo.trusted_proxies, peer)) return peer;

  // Walk right to left: each trusted hop vouches for the entry before it, so
  // the first untrusted address seen is the furthest one we can believe.
  std::optional<IpAddr> leftmost_valid;
  std::string_view rest = xff;
  while (!rest.empty()) {
    size_t comma = rest.rfind(',');
    std::string_view entry;
    if (comma == std::string_view::npos) {
      entry = rest;
      rest = {};
    } else {
      entry = rest.substr(comma + 1);
      rest = rest.substr(0, comma);
    }
    auto ip = ParseEntry(Trim(entry));
    if (!ip) continue;
    if (!IsTrusted(geo.trusted_proxies, *ip)) return *ip;
    leftmost_valid = ip;
  }
  // Every hop is one of ours (e.g. an internal client behind two internal
  // proxies): the left-most one is where the request started (DESIGN §7).
  return leftmost_valid ? *leftmost_valid : peer;
}

}  // namespace

bool IsTrusted(const std::vector<config::Cidr>& trusted, const IpAddr& ip) {
  for (const auto& c : trusted)
    if (c.contains(ip.bytes)) return true;
  return false;
}

IpAddr ResolveClientIp(const config::Geo& geo, const IpAddr& peer, std::string_view xff,
                       const std::optional<IpAddr>& proxy_source) {
  switch (geo.client_ip) {
    case config::ClientIpSource::kPeer:
      return peer;
    case config::ClientIpSource::kProxyProtocol:
      return proxy_source ? *proxy_source : peer;
    case config::ClientIpSource::kXForwardedFor:
      return ResolveXff(geo, peer, xff);
  }
  return peer;
}

}  // namespace geogate::routing
