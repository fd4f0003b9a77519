// GeoResolver over a MaxMind DB (.mmdb) file through libmaxminddb: GeoIP2 and
// GeoLite2 City/Country, and flat schemas such as ip-location-db's, through
// the configurable field paths of [geo] (DESIGN.md §5).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "config/snapshot.h"
#include "routing/geo_resolver.h"

struct MMDB_s;
struct MMDB_entry_s;

namespace geogate::routing {

/// Closes and frees an MMDB_s that MMDB_open succeeded on.
struct MmdbCloser {
  void operator()(MMDB_s* db) const;
};

class MmdbGeoResolver final : public GeoResolver {
 public:
  /// Opens `path` memory-mapped and checks that it is usable with `fields`
  /// (the *_field paths of [geo]; the other members are ignored): the file is
  /// a MaxMind DB, its search tree and data decode, and at least one of its
  /// first records carries `country_field` as a string. The last check turns
  /// a wrong schema (a flat database with the GeoIP2 default path, an ASN
  /// database) into an error at load instead of every client being unknown.
  /// @return the resolver, or an error whose message names the file and says
  ///         what is wrong with it (missing, unreadable, corrupt, wrong
  ///         schema, with the keys the records do have).
  static absl::StatusOr<std::shared_ptr<const MmdbGeoResolver>> Open(const std::string& path,
                                                                     const config::Geo& fields);

  ~MmdbGeoResolver() override;
  MmdbGeoResolver(const MmdbGeoResolver&) = delete;
  MmdbGeoResolver& operator=(const MmdbGeoResolver&) = delete;

  // routing::GeoResolver
  GeoInfo Lookup(const IpAddr& ip) const override;
  GeoDbInfo Info() const override;

 private:
  /// A dotted field path ("subdivisions.0.iso_code") split once into the
  /// NULL-terminated array MMDB_aget_value takes. Numeric components index
  /// arrays. Pinned in memory: `argv_` points into `parts_`.
  class FieldPath {
   public:
    FieldPath() = default;
    FieldPath(const FieldPath&) = delete;
    FieldPath& operator=(const FieldPath&) = delete;
    /// False when `dotted` has an empty component ("a..b", ".a").
    bool Set(std::string_view dotted);
    bool empty() const { return parts_.empty(); }
    size_t size() const { return parts_.size(); }
    const std::string& part(size_t i) const { return parts_[i]; }
    /// The path from component `from` on.
    const char* const* argv(size_t from = 0) const { return argv_.data() + from; }
    const std::string& text() const { return text_; }

   private:
    std::string text_;
    std::vector<std::string> parts_;
    std::vector<const char*> argv_;
  };

  explicit MmdbGeoResolver(std::unique_ptr<MMDB_s, MmdbCloser> db, std::string path);
  absl::Status SetFields(const config::Geo& fields);
  absl::Status CheckRecords() const;
  /// The configured fields of one record, continent derived when absent.
  GeoInfo Decode(const MMDB_entry_s& entry) const;

  std::unique_ptr<MMDB_s, MmdbCloser> db_;
  uint64_t id_;  // unique per instance, never reused: keys the record cache
  GeoDbInfo info_;
  FieldPath country_;
  FieldPath continent_;
  FieldPath subdivision_;
  FieldPath latitude_;
  FieldPath longitude_;
  /// The map holding both latitude and longitude ("location"), when their
  /// paths share one: looked up once, then both are read inside it.
  FieldPath location_;
};

}  // namespace geogate::routing
