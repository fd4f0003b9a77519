// Cross-check of MmdbGeoResolver against MaxMind's own test databases and
// their readable sources (GeoIP2-City-Test.source.json etc.), when the shared
// test data folder is present beside the checkout. The project's own tests
// never need it: without it these cases say so and pass.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "routing/mmdb_geo_resolver.h"
#include "routing_test_util.h"

using geogate::config::Geo;
using geogate::routing::GeoInfo;
using geogate::routing::IpAddr;
using geogate::routing::MmdbGeoResolver;
using geogate::routing::testing::Ip;

namespace {

namespace json = boost::json;

std::string TestdataDir() {
  if (const char* env = std::getenv("GEOGATE_GEOIP_TESTDATA"); env != nullptr && *env != '\0')
    return env;
  return GEOGATE_GEOIP_TESTDATA;
}

// True when the folder is there; otherwise warns once per test case.
bool HaveTestdata() {
  if (std::filesystem::is_directory(TestdataDir())) return true;
  WARN("SKIPPED: MaxMind test data not found at " << TestdataDir()
                                                  << " (set GEOGATE_GEOIP_TESTDATA to run this)");
  return false;
}

struct Network {
  IpAddr first;
  unsigned prefix = 0;  // over the 16-byte form
  const json::object* record = nullptr;
};

bool Contains(const Network& n, const IpAddr& ip) {
  for (unsigned bit = 0; bit < n.prefix; ++bit) {
    unsigned byte = bit / 8;
    uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
    if ((n.first.bytes[byte] & mask) != (ip.bytes[byte] & mask)) return false;
  }
  return true;
}

// "2001:218::/32", "::214.0.0.0/120", "81.2.69.142/31".
Network ParseNetwork(const std::string& cidr, const json::object* record) {
  size_t slash = cidr.find('/');
  REQUIRE(slash != std::string::npos);
  IpAddr ip = Ip(cidr.substr(0, slash));
  unsigned len = static_cast<unsigned>(std::stoi(cidr.substr(slash + 1)));
  return {ip, ip.is_v4() ? len + 96 : len, record};
}

// ::a.b.c.d as written in the sources is the IPv4 subtree of the database;
// the resolver reaches it through AF_INET from the v4-mapped form.
IpAddr AsV4IfInV4Subtree(const IpAddr& ip) {
  for (int i = 0; i < 12; ++i)
    if (ip.bytes[i] != 0) return ip;
  return IpAddr::FromV4(ip.v4());
}

// The aliased ranges of an IPv6 MaxMind database lead to the IPv4 data, not
// to whatever the source says about them; such entries are not comparable.
bool InAliasedRange(const IpAddr& ip) {
  bool v4_mapped = ip.is_v4();
  bool six_to_four = ip.bytes[0] == 0x20 && ip.bytes[1] == 0x02;
  bool teredo = ip.bytes[0] == 0x20 && ip.bytes[1] == 0x01 && ip.bytes[2] == 0 && ip.bytes[3] == 0;
  return v4_mapped || six_to_four || teredo;
}

const json::value* At(const json::object& o, std::initializer_list<const char*> path) {
  const json::value* v = nullptr;
  const json::object* cur = &o;
  for (const char* key : path) {
    if (cur == nullptr) return nullptr;
    v = cur->if_contains(key);
    if (v == nullptr) return nullptr;
    cur = v->if_object();
  }
  return v;
}

std::string StringAt(const json::object& o, std::initializer_list<const char*> path) {
  const json::value* v = At(o, path);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

struct Counts {
  size_t compared = 0;
  size_t with_country = 0;
  size_t with_location = 0;
};

// Looks every network of `source` up in `mmdb` by its first address and
// compares country, continent, first subdivision and location with the source.
Counts CrossCheck(const std::string& mmdb, const std::string& source) {
  auto geo_or = MmdbGeoResolver::Open(mmdb, Geo{});
  INFO(geo_or.status().ToString());
  REQUIRE(geo_or.ok());
  auto geo = *geo_or;

  std::ifstream in(source, std::ios::binary);
  REQUIRE(in);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  json::value doc = json::parse(text);
  std::vector<Network> nets;
  for (const json::value& entry : doc.as_array()) {
    for (const auto& kv : entry.as_object())
      nets.push_back(ParseNetwork(std::string(kv.key()), &kv.value().as_object()));
  }

  Counts counts;
  for (const Network& n : nets) {
    // A more specific network in the same source overrides this one's first
    // address: compare only where this record is the answer.
    bool overridden = false;
    for (const Network& m : nets)
      overridden |= &m != &n && m.prefix > n.prefix && Contains(m, n.first);
    if (overridden || InAliasedRange(n.first)) continue;

    const json::object& rec = *n.record;
    std::string country = StringAt(rec, {"country", "iso_code"});
    std::string continent = StringAt(rec, {"continent", "code"});
    std::string subdivision;
    if (const json::value* subs = At(rec, {"subdivisions"});
        subs && subs->is_array() && !subs->as_array().empty())
      subdivision = StringAt(subs->as_array()[0].as_object(), {"iso_code"});
    const json::value* lat = At(rec, {"location", "latitude"});
    const json::value* lon = At(rec, {"location", "longitude"});

    for (const IpAddr& ip : {n.first, AsV4IfInV4Subtree(n.first)}) {
      GeoInfo g = geo->Lookup(ip);
      INFO(source << ": " << ip.ToString() << " (prefix " << n.prefix << ")");
      CHECK(g.found == !country.empty());
      CHECK(std::string(g.country) == country);
      if (!continent.empty()) CHECK(std::string(g.continent) == continent);
      CHECK(std::string(g.subdivision) == subdivision);
      CHECK(g.has_location == (lat != nullptr && lon != nullptr));
      if (lat != nullptr && lon != nullptr && g.has_location) {
        CHECK(g.latitude == Approx(lat->to_number<double>()));
        CHECK(g.longitude == Approx(lon->to_number<double>()));
      }
    }
    ++counts.compared;
    counts.with_country += !country.empty();
    counts.with_location += lat != nullptr;
  }
  return counts;
}

}  // namespace

TEST_CASE("MaxMind test data: GeoIP2-City answers match the source", "[mmdb][maxmind]") {
  if (!HaveTestdata()) return;
  std::string dir = TestdataDir();
  Counts c = CrossCheck(dir + "/GeoIP2-City-Test.mmdb", dir + "/GeoIP2-City-Test.source.json");
  CHECK(c.compared > 200);
  CHECK(c.with_country > 200);
  CHECK(c.with_location > 20);
}

TEST_CASE("MaxMind test data: GeoLite2-City answers match the source", "[mmdb][maxmind]") {
  if (!HaveTestdata()) return;
  std::string dir = TestdataDir();
  Counts c = CrossCheck(dir + "/GeoLite2-City-Test.mmdb", dir + "/GeoLite2-City-Test.source.json");
  CHECK(c.compared > 200);
}

TEST_CASE("MaxMind test data: GeoIP2/GeoLite2-Country answers match the source",
          "[mmdb][maxmind]") {
  if (!HaveTestdata()) return;
  std::string dir = TestdataDir();
  for (const char* name : {"GeoIP2-Country-Test", "GeoLite2-Country-Test"}) {
    Counts c = CrossCheck(dir + "/" + name + ".mmdb", dir + "/" + name + ".source.json");
    CHECK(c.compared > 200);
    CHECK(c.with_location == 0);
  }
}

TEST_CASE("MaxMind test data: known entries", "[mmdb][maxmind]") {
  if (!HaveTestdata()) return;
  std::string dir = TestdataDir();
  auto geo = MmdbGeoResolver::Open(dir + "/GeoIP2-City-Test.mmdb", Geo{});
  REQUIRE(geo.ok());
  GeoInfo london = (*geo)->Lookup(Ip("81.2.69.142"));
  CHECK(std::string(london.country) == "GB");
  CHECK(std::string(london.continent) == "EU");
  CHECK(std::string(london.subdivision) == "ENG");
  CHECK(london.has_location);
  GeoInfo milton = (*geo)->Lookup(Ip("216.160.83.56"));
  CHECK(std::string(milton.country) == "US");
  CHECK(std::string(milton.subdivision) == "WA");
  CHECK(std::string((*geo)->Lookup(Ip("2001:218::1")).country) == "JP");
  CHECK((*geo)->Info().database_type == "GeoIP2-City");
  CHECK((*geo)->Info().ip_version == 6);
}

TEST_CASE("MaxMind test data: broken and foreign databases are refused", "[mmdb][maxmind]") {
  if (!HaveTestdata()) return;
  std::string dir = TestdataDir();
  for (const char* name :
       {"GeoIP2-City-Test-Broken-Double-Format.mmdb", "GeoIP2-City-Test-Invalid-Node-Count.mmdb",
        "MaxMind-DB-test-broken-pointers-24.mmdb", "MaxMind-DB-test-broken-search-tree-24.mmdb"}) {
    auto r = MmdbGeoResolver::Open(dir + "/" + name, Geo{});
    INFO(name << ": " << r.status().ToString());
    CHECK_FALSE(r.ok());
    if (!r.ok()) CHECK_THAT(std::string(r.status().message()), Catch::Contains(name));
  }
  // An ASN database has no country at all.
  auto asn = MmdbGeoResolver::Open(dir + "/GeoLite2-ASN-Test.mmdb", Geo{});
  REQUIRE_FALSE(asn.ok());
  CHECK_THAT(std::string(asn.status().message()), Catch::Contains("autonomous_system_number"));
}
