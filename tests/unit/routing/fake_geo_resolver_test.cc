#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "routing_test_util.h"
#include "testing/fake_geo_resolver.h"

using geogate::routing::FakeGeoResolver;
using geogate::routing::GeoInfo;
using geogate::routing::GeoResolverConstPtr;
using geogate::routing::testing::Ip;

TEST_CASE("FakeGeoResolver: longest prefix wins, continent derived", "[fake_geo]") {
  auto fake = std::make_shared<FakeGeoResolver>();
  fake->Add("192.0.2.0/24", "NL")
      .Add("192.0.2.192/27", "BE")
      .Add("192.0.2.7", "DE", "EU", 50.11, 8.68)
      .Add("2001:db8::/32", "US", "NA")
      .Add("203.0.113.9", FakeGeoResolver::Located(47.0, 8.0));
  GeoResolverConstPtr geo = fake;

  CHECK(std::string(geo->Lookup(Ip("192.0.2.1")).country) == "NL");
  CHECK(std::string(geo->Lookup(Ip("192.0.2.1")).continent) == "EU");
  CHECK(std::string(geo->Lookup(Ip("192.0.2.200")).country) == "BE");
  GeoInfo de = geo->Lookup(Ip("::ffff:192.0.2.7"));
  CHECK(std::string(de.country) == "DE");
  CHECK(de.has_location);
  CHECK(de.latitude == Approx(50.11));
  CHECK(std::string(geo->Lookup(Ip("2001:db8:1::1")).country) == "US");
  GeoInfo located = geo->Lookup(Ip("203.0.113.9"));
  CHECK_FALSE(located.found);
  CHECK(located.has_location);
  GeoInfo none = geo->Lookup(Ip("198.51.100.1"));
  CHECK_FALSE(none.found);
  CHECK_FALSE(none.has_location);
  CHECK(fake->lookups() == 7);
  CHECK(geo->Info().database_type == "Fake-Geo");
}

TEST_CASE("FakeGeoResolver: malformed prefixes throw", "[fake_geo]") {
  FakeGeoResolver fake;
  CHECK_THROWS_AS(fake.Add("192.0.2.0/33", "DE"), std::invalid_argument);
  CHECK_THROWS_AS(fake.Add("nope", "DE"), std::invalid_argument);
  CHECK_THROWS_AS(fake.Add("2001:db8::/129", "DE"), std::invalid_argument);
  CHECK_NOTHROW(fake.Add("0.0.0.0/0", "DE"));
  CHECK(std::string(fake.Lookup(Ip("8.8.8.8")).country) == "DE");
  CHECK_FALSE(fake.Lookup(Ip("2001:db8::1")).found);
}
