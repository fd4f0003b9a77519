// In-memory GeoResolver for unit tests of modules that consume geo results
// (residency, selection, the gateway): no database file needed.
//
//   auto geo = std::make_shared<FakeGeoResolver>();
//   geo->Add("192.0.2.0/24", "DE").Add("2001:db8::/32", "US", "NA", 38.9, -77.0);
//   geo->Add("203.0.113.7", FakeGeoResolver::Located(47.0, 8.0));  // no country
//   GeoResolverConstPtr resolver = geo;
//
// Fill it before sharing it: Add() is not synchronised with Lookup().
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "routing/country_continent.h"
#include "routing/geo_resolver.h"
#include "routing/ip_addr.h"

namespace geogate::routing {

class FakeGeoResolver final : public GeoResolver {
 public:
  /// A GeoInfo placed in `country`; `continent` defaults to the country's.
  static GeoInfo Placed(std::string_view country, std::string_view continent = {},
                        std::optional<std::pair<double, double>> lat_lon = std::nullopt,
                        std::string_view subdivision = {}) {
    GeoInfo g;
    g.found = true;
    Copy(country, g.country);
    if (continent.empty()) {
      if (const char* c = ContinentOfCountry(country)) continent = c;
    }
    Copy(continent, g.continent);
    Copy(subdivision, g.subdivision);
    if (lat_lon) {
      g.has_location = true;
      g.latitude = lat_lon->first;
      g.longitude = lat_lon->second;
    }
    return g;
  }

  /// A record with a location and no country (found == false).
  static GeoInfo Located(double lat, double lon) {
    GeoInfo g;
    g.has_location = true;
    g.latitude = lat;
    g.longitude = lon;
    return g;
  }

  /// Maps an address ("192.0.2.1", "2001:db8::1") or a prefix
  /// ("192.0.2.0/24", "2001:db8::/32") to `info`. The longest matching prefix
  /// wins; an exact address is a /32 or /128. Throws std::invalid_argument on
  /// a malformed prefix (tests only).
  FakeGeoResolver& Add(std::string_view prefix, const GeoInfo& info) {
    entries_.push_back({ParsePrefix(prefix), info});
    return *this;
  }
  FakeGeoResolver& Add(std::string_view prefix, std::string_view country,
                       std::string_view continent = {}) {
    return Add(prefix, Placed(country, continent));
  }
  FakeGeoResolver& Add(std::string_view prefix, std::string_view country,
                       std::string_view continent, double lat, double lon) {
    return Add(prefix, Placed(country, continent, std::make_pair(lat, lon)));
  }

  void set_info(GeoDbInfo info) { info_ = std::move(info); }

  /// Number of Lookup() calls so far (tests that check caching).
  uint64_t lookups() const { return lookups_.load(std::memory_order_relaxed); }

  // routing::GeoResolver
  GeoInfo Lookup(const IpAddr& ip) const override {
    lookups_.fetch_add(1, std::memory_order_relaxed);
    const Entry* best = nullptr;
    for (const Entry& e : entries_) {
      if (Contains(e.prefix, ip) && (best == nullptr || e.prefix.len > best->prefix.len)) best = &e;
    }
    return best != nullptr ? best->info : GeoInfo{};
  }
  GeoDbInfo Info() const override { return info_; }

 private:
  struct Prefix {
    IpAddr addr;
    unsigned len = 0;  // over the 16-byte form (IPv4 /n is n + 96)
  };
  struct Entry {
    Prefix prefix;
    GeoInfo info;
  };

  template <size_t N>
  static void Copy(std::string_view s, char (&out)[N]) {
    size_t n = std::min(s.size(), N - 1);
    for (size_t i = 0; i < n; ++i)
      out[i] = (s[i] >= 'a' && s[i] <= 'z') ? static_cast<char>(s[i] - 'a' + 'A') : s[i];
    out[n] = '\0';
  }

  static Prefix ParsePrefix(std::string_view text) {
    size_t slash = text.find('/');
    auto ip = IpAddr::Parse(text.substr(0, slash));
    if (!ip) throw std::invalid_argument("FakeGeoResolver: bad address in " + std::string(text));
    unsigned max = ip->is_v4() ? 32 : 128;
    unsigned len = max;
    if (slash != std::string_view::npos) {
      std::string_view digits = text.substr(slash + 1);
      if (digits.empty() || digits.size() > 3)
        throw std::invalid_argument("FakeGeoResolver: bad prefix " + std::string(text));
      len = 0;
      for (char c : digits) {
        if (c < '0' || c > '9')
          throw std::invalid_argument("FakeGeoResolver: bad prefix " + std::string(text));
        len = len * 10 + static_cast<unsigned>(c - '0');
      }
      if (len > max)
        throw std::invalid_argument("FakeGeoResolver: bad prefix " + std::string(text));
    }
    return {*ip, ip->is_v4() ? len + 96 : len};
  }

  static bool Contains(const Prefix& p, const IpAddr& ip) {
    unsigned full = p.len / 8;
    if (std::memcmp(p.addr.bytes.data(), ip.bytes.data(), full) != 0) return false;
    unsigned rest = p.len % 8;
    if (rest == 0) return true;
    auto mask = static_cast<uint8_t>(0xFF << (8 - rest));
    return (p.addr.bytes[full] & mask) == (ip.bytes[full] & mask);
  }

  std::vector<Entry> entries_;
  GeoDbInfo info_{"fake", "Fake-Geo", 0, 6, 0};
  mutable std::atomic<uint64_t> lookups_{0};
};

}  // namespace geogate::routing
