// The decisions of gateway.limits.max_connections and max_connections_per_ip:
// whether a new client connection is admitted, and who makes room for it.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "routing/ip_addr.h"

namespace geogate::proxy {

struct Admission {
  enum class Kind : uint8_t {
    kAdmit,      // room to spare (or no limit)
    kEvictIdle,  // admit, and close the longest-idle connection of `worker`
    kRefuse,     // at the limit and nothing idle: answer 503
  };
  Kind kind = Kind::kAdmit;
  size_t worker = 0;
};

/// @param open the process's open client connections, the new one not counted
/// @param max_connections the limit; 0 = none
/// @param oldest_idle_ns per worker, when its longest-idle connection went
///        idle (kNoIdle when it has none)
/// @param self the deciding worker: it wins ties (its close needs no hop)
Admission Admit(int64_t open, uint32_t max_connections, std::span<const int64_t> oldest_idle_ns,
                size_t self);

/// Open client connections per client address, shared by the workers. Used
/// only while max_connections_per_ip is set: one short lock per connection
/// accepted and closed, nothing per request.
class ConnectionsPerIp {
 public:
  /// Counts a connection from `ip` unless it already has `limit`.
  /// @return false (nothing counted) at the limit.
  bool TryAdd(const routing::IpAddr& ip, uint32_t limit);
  /// Uncounts one connection TryAdd counted.
  void Remove(const routing::IpAddr& ip);
  uint32_t Count(const routing::IpAddr& ip) const;
  /// Addresses with at least one connection.
  size_t addresses() const;

 private:
  struct Hash {
    size_t operator()(const routing::IpAddr& ip) const;
  };
  mutable std::mutex mu_;
  absl::flat_hash_map<routing::IpAddr, uint32_t, Hash> counts_;
};

}  // namespace geogate::proxy
