#include "proxy/connection_limits.h"

#include "absl/hash/hash.h"
#include "proxy/idle_list.h"

namespace geogate::proxy {

Admission Admit(int64_t open, uint32_t max_connections, std::span<const int64_t> oldest_idle_ns,
                size_t self) {
  if (max_connections == 0 || open < static_cast<int64_t>(max_connections)) return {};
  // At the limit: the connection idle longest, on whichever worker, makes
  // room; a client's idle keep-alives never lock the others out.
  size_t best = self;
  int64_t best_since = self < oldest_idle_ns.size() ? oldest_idle_ns[self] : kNoIdle;
  for (size_t i = 0; i < oldest_idle_ns.size(); ++i) {
    if (oldest_idle_ns[i] < best_since) {
      best = i;
      best_since = oldest_idle_ns[i];
    }
  }
  if (best_since == kNoIdle) return {Admission::Kind::kRefuse, 0};
  return {Admission::Kind::kEvictIdle, best};
}

size_t ConnectionsPerIp::Hash::operator()(const routing::IpAddr& ip) const {
  return absl::HashOf(ip.bytes);
}

bool ConnectionsPerIp::TryAdd(const routing::IpAddr& ip, uint32_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t& n = counts_[ip];
  if (limit != 0 && n >= limit) return false;
  ++n;
  return true;
}

void ConnectionsPerIp::Remove(const routing::IpAddr& ip) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counts_.find(ip);
  if (it == counts_.end()) return;
  if (--it->second == 0) counts_.erase(it);
}

uint32_t ConnectionsPerIp::Count(const routing::IpAddr& ip) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counts_.find(ip);
  return it == counts_.end() ? 0 : it->second;
}

size_t ConnectionsPerIp::addresses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_.size();
}

}  // namespace geogate::proxy
