// Which address is the client (DESIGN.md §4 step 4).
#pragma once

#include <optional>
#include <string_view>

#include "config/snapshot.h"
#include "routing/ip_addr.h"

namespace geogate::routing {

/// True when `ip` is inside any of `trusted`.
bool IsTrusted(const std::vector<config::Cidr>& trusted, const IpAddr& ip);

/// @param geo the [geo] section (client_ip mode and trusted_proxies).
/// @param peer the TCP peer address.
/// @param xff every X-Forwarded-For value of the request joined with ","
///        (empty when there is none).
/// @param proxy_source the PROXY-protocol source address, when the listener
///        has proxy_protocol and the header carried one.
/// @return the client address. With "x-forwarded-for": the peer unless it is
///        trusted; else the right-most valid XFF entry that is not trusted;
///        the left-most valid entry when all are trusted; malformed entries
///        are skipped; entries may carry ports ("1.2.3.4:80", "[::1]:80").
///        With "proxy-protocol": proxy_source, else the peer; XFF ignored.
IpAddr ResolveClientIp(const config::Geo& geo, const IpAddr& peer, std::string_view xff,
                       const std::optional<IpAddr>& proxy_source);

}  // namespace geogate::routing
