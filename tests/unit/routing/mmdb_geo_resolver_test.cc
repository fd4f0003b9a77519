#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "routing/mmdb_geo_resolver.h"
#include "routing_test_util.h"

using geogate::config::Geo;
using geogate::routing::GeoInfo;
using geogate::routing::MmdbGeoResolver;
using geogate::routing::testing::Ip;

namespace {

const char* const kCity = GEOGATE_GEO_CITY_MMDB;
const char* const kFlat = GEOGATE_GEO_FLAT_MMDB;
const char* const kFlatV4 = GEOGATE_GEO_FLAT_V4_MMDB;

Geo FlatFields() {
  Geo g;
  g.country_field = "country_code";
  return g;
}

std::shared_ptr<const MmdbGeoResolver> OpenOrFail(const std::string& path, const Geo& fields) {
  auto r = MmdbGeoResolver::Open(path, fields);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

struct Want {
  const char* ip;
  const char* country;
  const char* continent;
  const char* subdivision;
  double lat;
  double lon;
};

void CheckPlaced(const GeoInfo& g, const Want& w, bool with_details) {
  INFO(w.ip);
  CHECK(g.found);
  CHECK(std::string(g.country) == w.country);
  CHECK(std::string(g.continent) == w.continent);
  if (with_details) {
    CHECK(std::string(g.subdivision) == w.subdivision);
    CHECK(g.has_location);
    CHECK(g.latitude == Approx(w.lat));
    CHECK(g.longitude == Approx(w.lon));
  } else {
    CHECK(std::string(g.subdivision).empty());
    CHECK_FALSE(g.has_location);
  }
}

void CheckNothing(const GeoInfo& g) {
  CHECK_FALSE(g.found);
  CHECK(std::string(g.country).empty());
  CHECK(std::string(g.continent).empty());
  CHECK(std::string(g.subdivision).empty());
  CHECK_FALSE(g.has_location);
}

// The fixture's mapping (tests/fixtures/geo/README.md), IPv4 and IPv6.
const Want kPlaced[] = {
    {"192.0.2.1", "DE", "EU", "HE", 50.11, 8.68},
    {"192.0.2.15", "DE", "EU", "HE", 50.11, 8.68},
    {"192.0.2.17", "FR", "EU", "IDF", 48.86, 2.35},
    {"192.0.2.33", "IE", "EU", "L", 53.35, -6.26},
    {"192.0.2.49", "CH", "EU", "ZH", 47.37, 8.54},
    {"192.0.2.65", "NO", "EU", "03", 59.91, 10.75},
    {"192.0.2.81", "GB", "EU", "ENG", 51.51, -0.13},
    {"192.0.2.129", "NL", "EU", "NH", 52.37, 4.90},
    {"192.0.2.255", "NL", "EU", "NH", 52.37, 4.90},
    {"192.0.2.193", "BE", "EU", "BRU", 50.85, 4.35},
    {"198.51.100.1", "US", "NA", "CA", 37.77, -122.42},
    {"198.51.100.17", "US", "NA", "VA", 38.95, -77.45},
    {"198.51.100.33", "CA", "NA", "ON", 43.65, -79.38},
    {"198.51.100.49", "BR", "SA", "SP", -23.55, -46.63},
    {"203.0.113.1", "JP", "AS", "13", 35.68, 139.69},
    {"203.0.113.17", "IN", "AS", "MH", 19.08, 72.88},
    {"203.0.113.49", "AU", "OC", "NSW", -33.87, 151.21},
    {"203.0.113.65", "ZA", "AF", "GP", -26.20, 28.05},
    {"127.10.1.1", "DE", "EU", "HE", 50.11, 8.68},
    {"127.10.2.200", "US", "NA", "VA", 38.95, -77.45},
    {"127.10.3.3", "JP", "AS", "13", 35.68, 139.69},
    {"2001:db8:49::1", "DE", "EU", "HE", 50.11, 8.68},
    {"2001:db8:49:ffff:ffff:ffff:ffff:ffff", "DE", "EU", "HE", 50.11, 8.68},
    {"2001:db8:33::1", "FR", "EU", "IDF", 48.86, 2.35},
    {"2001:db8:353::1", "IE", "EU", "L", 53.35, -6.26},
    {"2001:db8:41::1", "CH", "EU", "ZH", 47.37, 8.54},
    {"2001:db8:47::1", "NO", "EU", "03", 59.91, 10.75},
    {"2001:db8:44::1", "GB", "EU", "ENG", 51.51, -0.13},
    {"2001:db8:1::1", "US", "NA", "VA", 38.95, -77.45},
    {"2001:db8:1ca::1", "CA", "NA", "ON", 43.65, -79.38},
    {"2001:db8:55::1", "BR", "SA", "SP", -23.55, -46.63},
    {"2001:db8:81::1", "JP", "AS", "13", 35.68, 139.69},
    {"2001:db8:91::1", "IN", "AS", "MH", 19.08, 72.88},
    {"2001:db8:61::1", "AU", "OC", "NSW", -33.87, 151.21},
    {"2001:db8:27::1", "ZA", "AF", "GP", -26.20, 28.05},
};

const char* const kNotInTree[] = {"127.0.0.1",     "10.0.0.1", "192.0.2.100", "198.51.100.64",
                                  "203.0.113.200", "8.8.8.8",  "2001:db8::1", "2001:db8:dead::1",
                                  "2001:db9::1",   "::1",      "::"};

class TempDir {
 public:
  TempDir() {
    path_ =
        std::filesystem::temp_directory_path() / ("geogate-geo-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& bytes) const {
    std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("mmdb: GeoIP2-City fixture places every fixture network", "[mmdb]") {
  auto geo = OpenOrFail(kCity, Geo{});
  for (const Want& w : kPlaced)
    CheckPlaced(geo->Lookup(Ip(w.ip)), w, true);
  // Singapore has no subdivision in the fixture.
  GeoInfo sg = geo->Lookup(Ip("203.0.113.33"));
  CHECK(std::string(sg.country) == "SG");
  CHECK(std::string(sg.continent) == "AS");
  CHECK(std::string(sg.subdivision).empty());
  CHECK(sg.has_location);
}

TEST_CASE("mmdb: IPv4-mapped and 6to4 addresses find the IPv4 data", "[mmdb]") {
  auto geo = OpenOrFail(kCity, Geo{});
  CHECK(std::string(geo->Lookup(Ip("::ffff:192.0.2.1")).country) == "DE");
  CHECK(std::string(geo->Lookup(Ip("2002:c000:0201::1")).country) == "DE");
}

TEST_CASE("mmdb: records without a country", "[mmdb]") {
  auto geo = OpenOrFail(kCity, Geo{});
  for (const char* ip : {"203.0.113.97", "2001:db8:ffff::1", "127.10.4.1"}) {
    INFO(ip);
    GeoInfo g = geo->Lookup(Ip(ip));
    CHECK_FALSE(g.found);
    CHECK(std::string(g.country).empty());
    CHECK(std::string(g.continent).empty());
    CHECK(g.has_location);
    CHECK(g.latitude == Approx(47.0));
    CHECK(g.longitude == Approx(8.0));
  }
  CheckNothing(geo->Lookup(Ip("203.0.113.113")));  // empty record
}

TEST_CASE("mmdb: addresses not in the tree", "[mmdb]") {
  for (const char* db : {kCity, kFlat}) {
    Geo fields = db == kCity ? Geo{} : FlatFields();
    auto geo = OpenOrFail(db, fields);
    for (const char* ip : kNotInTree) {
      INFO(db << " " << ip);
      CheckNothing(geo->Lookup(Ip(ip)));
    }
  }
}

TEST_CASE("mmdb: flat country_code schema derives the continent", "[mmdb]") {
  auto geo = OpenOrFail(kFlat, FlatFields());
  for (const Want& w : kPlaced)
    CheckPlaced(geo->Lookup(Ip(w.ip)), w, false);
  // The no-country networks are absent from the flat database.
  CheckNothing(geo->Lookup(Ip("203.0.113.97")));
  CheckNothing(geo->Lookup(Ip("2001:db8:ffff::1")));
}

TEST_CASE("mmdb: an IPv4-only database places IPv4 and never IPv6", "[mmdb]") {
  auto geo = OpenOrFail(kFlatV4, FlatFields());
  CHECK(geo->Info().ip_version == 4);
  for (const Want& w : kPlaced) {
    GeoInfo g = geo->Lookup(Ip(w.ip));
    if (Ip(w.ip).is_v4()) {
      CheckPlaced(g, w, false);
    } else {
      INFO(w.ip);
      CheckNothing(g);
    }
  }
  CHECK(std::string(geo->Lookup(Ip("::ffff:198.51.100.49")).country) == "BR");
}

TEST_CASE("mmdb: continent is derived when the field is not configured", "[mmdb]") {
  Geo fields;
  fields.continent_field = "";
  fields.subdivision_field = "";
  fields.latitude_field = "";
  fields.longitude_field = "";
  auto geo = OpenOrFail(kCity, fields);
  GeoInfo g = geo->Lookup(Ip("203.0.113.49"));
  CHECK(std::string(g.country) == "AU");
  CHECK(std::string(g.continent) == "OC");
  CHECK(std::string(g.subdivision).empty());
  CHECK_FALSE(g.has_location);
}

TEST_CASE("mmdb: field paths are configurable", "[mmdb]") {
  // A path that exists but is not where the continent is: derived instead.
  Geo fields;
  fields.continent_field = "continent.nonexistent";
  fields.subdivision_field = "subdivisions.1.iso_code";  // no second subdivision
  auto geo = OpenOrFail(kCity, fields);
  GeoInfo g = geo->Lookup(Ip("198.51.100.49"));
  CHECK(std::string(g.country) == "BR");
  CHECK(std::string(g.continent) == "SA");
  CHECK(std::string(g.subdivision).empty());
  CHECK(g.has_location);
}

TEST_CASE("mmdb: Info() reports the metadata", "[mmdb]") {
  auto city = OpenOrFail(kCity, Geo{})->Info();
  CHECK(city.path == kCity);
  CHECK(city.database_type == "GeoIP2-City");
  CHECK(city.build_epoch == 1700000000);
  CHECK(city.ip_version == 6);
  CHECK(city.node_count > 0);
  auto flat = OpenOrFail(kFlat, FlatFields())->Info();
  CHECK(flat.database_type == "geo-whois-asn-country");
  CHECK(flat.ip_version == 6);
  CHECK(flat.build_epoch == 1700000000);
}

TEST_CASE("mmdb: a wrong schema fails at open with a useful message", "[mmdb]") {
  // The flat database with the GeoIP2 default path.
  auto r = MmdbGeoResolver::Open(kFlat, Geo{});
  REQUIRE_FALSE(r.ok());
  std::string msg(r.status().message());
  CHECK_THAT(msg, Catch::Contains(kFlat));
  CHECK_THAT(msg, Catch::Contains("country.iso_code"));
  CHECK_THAT(msg, Catch::Contains("[country_code]"));

  // The City database with a path that names a map.
  Geo fields;
  fields.country_field = "country";
  r = MmdbGeoResolver::Open(kCity, fields);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("it is a map"));
}

TEST_CASE("mmdb: bad field paths are rejected", "[mmdb]") {
  for (const char* path : {"", "country..iso_code", ".country", "country."}) {
    INFO("'" << path << "'");
    Geo fields;
    fields.country_field = path;
    CHECK_FALSE(MmdbGeoResolver::Open(kCity, fields).ok());
  }
  Geo fields;
  fields.latitude_field = "location..latitude";
  CHECK_FALSE(MmdbGeoResolver::Open(kCity, fields).ok());
}

TEST_CASE("mmdb: missing, unreadable and corrupt files are clear errors", "[mmdb]") {
  TempDir dir;
  SECTION("missing") {
    std::string p = dir.path() + "/nope.mmdb";
    auto r = MmdbGeoResolver::Open(p, Geo{});
    REQUIRE_FALSE(r.ok());
    CHECK(absl::IsNotFound(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains(p));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("No such file"));
  }
  SECTION("a directory") {
    auto r = MmdbGeoResolver::Open(dir.path(), Geo{});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("directory"));
  }
  SECTION("not a database") {
    std::string p = dir.Write("text.mmdb", "this is not a MaxMind database\n");
    auto r = MmdbGeoResolver::Open(p, Geo{});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains(p));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("not a valid MaxMind DB"));
  }
  SECTION("empty") {
    auto r = MmdbGeoResolver::Open(dir.Write("empty.mmdb", ""), Geo{});
    REQUIRE_FALSE(r.ok());
  }
  SECTION("truncated") {
    std::string bytes = ReadFile(kCity);
    REQUIRE(bytes.size() > 1000);
    auto r =
        MmdbGeoResolver::Open(dir.Write("half.mmdb", bytes.substr(0, bytes.size() / 2)), Geo{});
    REQUIRE_FALSE(r.ok());
  }
  SECTION("search tree overwritten") {
    std::string bytes = ReadFile(kCity);
    // Point the first records far outside the tree and the data section.
    for (size_t i = 0; i < 60; ++i)
      bytes[i] = '\xFE';
    auto r = MmdbGeoResolver::Open(dir.Write("tree.mmdb", bytes), Geo{});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("corrupt"));
  }
}

TEST_CASE("mmdb: lookups are thread-safe", "[mmdb]") {
  auto geo = OpenOrFail(kCity, Geo{});
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        for (const Want& w : kPlaced) {
          GeoInfo g = geo->Lookup(*geogate::routing::IpAddr::Parse(w.ip));
          if (std::string(g.country) != w.country) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("mmdb: answers of differently configured resolvers never mix", "[mmdb]") {
  // Same file, same record offsets: the per-thread record cache must keep
  // each resolver's (and each reload's) answers apart.
  auto full = OpenOrFail(kCity, Geo{});
  Geo bare_fields;
  bare_fields.subdivision_field = "";
  bare_fields.latitude_field = "";
  auto bare = OpenOrFail(kCity, bare_fields);
  for (int round = 0; round < 3; ++round) {
    for (const Want& w : kPlaced) {
      INFO(w.ip);
      CHECK(std::string(full->Lookup(Ip(w.ip)).subdivision) == w.subdivision);
      GeoInfo b = bare->Lookup(Ip(w.ip));
      CHECK(std::string(b.country) == w.country);
      CHECK(std::string(b.subdivision).empty());
      CHECK_FALSE(b.has_location);
    }
  }
  // A reopened database is a new resolver, even at the same address.
  full.reset();
  auto again = OpenOrFail(kCity, bare_fields);
  CHECK(std::string(again->Lookup(Ip("192.0.2.1")).subdivision).empty());
}
