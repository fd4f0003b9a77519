// Where a client is. The interface the request path uses; MmdbGeoResolver is
// the libmaxminddb implementation, tests use an in-memory fake.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "routing/ip_addr.h"

namespace geogate::routing {

struct GeoInfo {
  bool found = false;        // the database placed the address in a country
  char country[3] = {};      // ISO 3166-1 alpha-2, upper case, NUL-terminated
  char continent[3] = {};    // AF AN AS EU NA OC SA (derived from the country when absent)
  char subdivision[8] = {};  // ISO 3166-2 subdivision code part, may be empty
  bool has_location = false;
  double latitude = 0;
  double longitude = 0;
};

struct GeoDbInfo {
  std::string path;
  std::string database_type;  // metadata database_type, e.g. "GeoIP2-City"
  uint64_t build_epoch = 0;   // seconds since 1970
  uint32_t ip_version = 0;
  uint64_t node_count = 0;
};

class GeoResolver {
 public:
  virtual ~GeoResolver() = default;
  /// Thread-safe; never throws; costs well under a microsecond.
  virtual GeoInfo Lookup(const IpAddr& ip) const = 0;
  virtual GeoDbInfo Info() const = 0;
};

using GeoResolverConstPtr = std::shared_ptr<const GeoResolver>;

}  // namespace geogate::routing
