// PROXY protocol v1 (text) and v2 (binary) header parser, as sent by L4 load
// balancers (HAProxy spec "proxy-protocol.txt"). Incremental: call with the
// bytes received so far until it says kDone or kInvalid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "routing/ip_addr.h"

namespace geogate::routing {

struct ProxyHeader {
  size_t consumed = 0;        // bytes of the header, to drop from the stream
  bool local = false;         // v2 LOCAL command or v1 UNKNOWN: use the peer address
  std::optional<IpAddr> source;
  uint16_t source_port = 0;
  std::optional<IpAddr> destination;
  uint16_t destination_port = 0;
};

enum class ProxyParseStatus { kNeedMore, kDone, kInvalid };

struct ProxyParseResult {
  ProxyParseStatus status = ProxyParseStatus::kNeedMore;
  ProxyHeader header;  // valid when kDone
};

/// Largest header this parser accepts; a peer that sends more without
/// completing one is invalid.
inline constexpr size_t kMaxProxyHeaderBytes = 16 + 65535;

ProxyParseResult ParseProxyProtocol(std::span<const uint8_t> data);

}  // namespace geogate::routing
