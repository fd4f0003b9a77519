// Fuzzes the X-Forwarded-For walk and IpAddr parsing. The first input byte
// picks the mode, the peer and the trusted set; the rest is the header value.
// Checks, besides the sanitizers:
//  - an untrusted peer, peer mode and proxy-protocol mode never read XFF;
//  - with a trusted peer, the answer is the peer or an address that is in
//    the header;
//  - every address that parses formats back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "routing/client_ip.h"
#include "tests/fuzz/fuzz_check.h"

using geogate::config::Cidr;
using geogate::config::ClientIpSource;
using geogate::config::Geo;
using geogate::routing::IpAddr;
using geogate::routing::IsTrusted;
using geogate::routing::ResolveClientIp;

using geogate::fuzz::Check;

namespace {

Cidr Prefix(const char* addr, int len) {
  IpAddr ip = *IpAddr::Parse(addr);
  Cidr c;
  c.addr = ip.bytes;
  c.prefix_len = static_cast<uint8_t>(ip.is_v4() ? len + 96 : len);
  return c;
}

void CheckRoundTrip(std::string_view text) {
  if (auto ip = IpAddr::Parse(text)) {
    auto back = IpAddr::Parse(ip->ToString());
    Check(back.has_value() && *back == *ip);
  }
}

// Splits like the resolver does, trimming spaces and tabs, and strips an
// optional port or brackets; true when `want` is one of the entries.
bool HeaderMentions(std::string_view xff, const IpAddr& want) {
  bool found = false;
  while (!found) {
    size_t comma = xff.find(',');
    std::string_view e = xff.substr(0, comma);
    while (!e.empty() && (e.front() == ' ' || e.front() == '\t'))
      e.remove_prefix(1);
    while (!e.empty() && (e.back() == ' ' || e.back() == '\t'))
      e.remove_suffix(1);
    if (!e.empty() && e.front() == '[') e = e.substr(1, e.find(']') - 1);
    auto whole = IpAddr::Parse(e);
    auto before_colon = IpAddr::Parse(e.substr(0, e.find(':')));
    found = (whole && *whole == want) || (before_colon && *before_colon == want);
    if (comma == std::string_view::npos) break;
    xff.remove_prefix(comma + 1);
  }
  return found;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  std::string_view xff(reinterpret_cast<const char*>(data + 1), size - 1);

  CheckRoundTrip(xff);
  for (std::string_view rest = xff; !rest.empty();) {
    size_t comma = rest.find(',');
    CheckRoundTrip(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }

  Geo geo;
  switch (selector & 3) {
    case 0:
      geo.client_ip = ClientIpSource::kPeer;
      break;
    case 1:
      geo.client_ip = ClientIpSource::kProxyProtocol;
      break;
    default:
      geo.client_ip = ClientIpSource::kXForwardedFor;
      break;
  }
  if (selector & 4) geo.trusted_proxies.push_back(Prefix("10.0.0.0", 8));
  if (selector & 8) geo.trusted_proxies.push_back(Prefix("127.0.0.0", 8));
  if (selector & 16) geo.trusted_proxies.push_back(Prefix("fd00::", 8));
  if (selector & 32) geo.trusted_proxies.push_back(Prefix("0.0.0.0", 0));
  const IpAddr peer = *IpAddr::Parse((selector & 64) ? "fd00::1" : "10.0.0.1");
  const IpAddr proxy_source = *IpAddr::Parse("198.51.100.1");
  std::optional<IpAddr> proxy;
  if (selector & 128) proxy = proxy_source;

  IpAddr client = ResolveClientIp(geo, peer, xff, proxy);
  switch (geo.client_ip) {
    case ClientIpSource::kPeer:
      Check(client == peer);
      break;
    case ClientIpSource::kProxyProtocol:
      Check(client == (proxy ? proxy_source : peer));
      break;
    case ClientIpSource::kXForwardedFor:
      if (!IsTrusted(geo.trusted_proxies, peer)) {
        Check(client == peer);
      } else if (client != peer) {
        Check(HeaderMentions(xff, client));
      }
      break;
  }
  return 0;
}
