// The address forms geogate.toml accepts: numeric "host:port" for sockets the
// gateway binds, CIDR prefixes for trusted proxies, and http(s) URLs for
// backends. Pure functions; the caller adds the file position to the error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "config/snapshot.h"

namespace geogate::config {

struct HostPort {
  std::string host;  // canonical numeric form: "0.0.0.0", "::1"
  uint16_t port = 0;
};

/// "1.2.3.4:80" or "[2001:db8::1]:80". Names are refused: a bind address must
/// not depend on DNS. Port 0 ("pick one") only when `allow_port_zero`.
absl::StatusOr<HostPort> ParseHostPort(std::string_view text, bool allow_port_zero);

/// "10.0.0.0/8", "2001:db8::/32", or a bare address (/32, /128). IPv4 lands
/// IPv4-mapped with the prefix shifted by 96. Host bits must be zero.
absl::StatusOr<Cidr> ParseCidr(std::string_view text);

struct BackendUrl {
  bool tls = false;
  std::string host;       // registered name or IP literal, IPv6 without brackets
  uint16_t port = 0;      // explicit, else 80/443
  std::string base_path;  // "" or "/prefix" (no trailing '/'), percent-encoded as written
  // The backend's root: base_path without a final "/v1" segment. The URL is
  // an OpenAI base URL, so that /v1 is the client path's own: the gateway
  // sends root + "/v1/chat/completions", root + health.path.
  std::string root;
};

/// An absolute http:// or https:// URL with a host and nothing that cannot be
/// part of an upstream base (no userinfo, query, fragment or dot segment).
absl::StatusOr<BackendUrl> ParseBackendUrl(std::string_view text);

}  // namespace geogate::config
