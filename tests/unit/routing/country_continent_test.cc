#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "routing/country_continent.h"

using geogate::routing::ContinentOfCountry;

TEST_CASE("ContinentOfCountry maps countries to GeoIP2 continent codes", "[continent]") {
  struct Case {
    const char* country;
    const char* continent;
  };
  for (Case c :
       {Case{"DE", "EU"}, {"FR", "EU"}, {"IE", "EU"}, {"CH", "EU"}, {"NO", "EU"}, {"GB", "EU"},
        {"RU", "EU"},     {"CY", "EU"}, {"XK", "EU"}, {"US", "NA"}, {"CA", "NA"}, {"MX", "NA"},
        {"GL", "NA"},     {"PA", "NA"}, {"BR", "SA"}, {"AR", "SA"}, {"GF", "SA"}, {"JP", "AS"},
        {"IN", "AS"},     {"SG", "AS"}, {"TR", "AS"}, {"GE", "AS"}, {"AU", "OC"}, {"NZ", "OC"},
        {"TL", "OC"},     {"ZA", "AF"}, {"EG", "AF"}, {"RE", "AF"}, {"AQ", "AN"}, {"TF", "AN"}}) {
    INFO(c.country);
    REQUIRE(ContinentOfCountry(c.country) != nullptr);
    CHECK(std::string(ContinentOfCountry(c.country)) == c.continent);
  }
  CHECK(std::string(ContinentOfCountry("de")) == "EU");
  CHECK(std::string(ContinentOfCountry("jP")) == "AS");
}

TEST_CASE("ContinentOfCountry knows every ISO 3166-1 code and nothing else", "[continent]") {
  std::set<std::string> continents;
  int known = 0;
  for (char a = 'A'; a <= 'Z'; ++a) {
    for (char b = 'A'; b <= 'Z'; ++b) {
      const char code[3] = {a, b, '\0'};
      if (const char* c = ContinentOfCountry(code)) {
        ++known;
        continents.insert(c);
      }
    }
  }
  // 249 ISO 3166-1 alpha-2 codes plus XK (Kosovo).
  CHECK(known == 250);
  CHECK(continents == std::set<std::string>{"AF", "AN", "AS", "EU", "NA", "OC", "SA"});
  for (const char* bad : {"", "D", "DEU", "ZZ", "XX", "EU", "AP", "1A", "d-", "??"}) {
    INFO(bad);
    CHECK(ContinentOfCountry(bad) == nullptr);
  }
}
