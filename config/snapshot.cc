#include "config/snapshot.h"

namespace geogate::config {

bool Cidr::contains(const std::array<uint8_t, 16>& ip16) const {
  size_t full = prefix_len / 8;
  for (size_t i = 0; i < full; ++i)
    if (ip16[i] != addr[i]) return false;
  size_t rest = prefix_len % 8;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (ip16[full] & mask) == (addr[full] & mask);
}

const char* TierName(Tier t) {
  switch (t) {
    case Tier::kReserved:
      return "reserved";
    case Tier::kOnDemand:
      return "on-demand";
    case Tier::kSpot:
      return "spot";
  }
  return "unknown";
}

std::optional<size_t> Snapshot::FindModel(std::string_view name) const {
  // Debian's abseil has its own string_view type (ABSL_OPTION_USE_STD_STRING_VIEW 0).
  auto it = model_by_name.find(absl::string_view(name.data(), name.size()));
  if (it == model_by_name.end()) return std::nullopt;
  return it->second;
}

}  // namespace geogate::config
