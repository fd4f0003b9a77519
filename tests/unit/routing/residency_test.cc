#include <catch2/catch.hpp>

#include "config/loader.h"
#include "routing/residency.h"

using namespace geogate;
using routing::DecideResidency;
using routing::GeoInfo;
using routing::ResidencyOutcome;
using routing::ResidencySource;

namespace {

constexpr std::string_view kPolicy = R"(
[gateway]
edge = "fra1"
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
unknown = "deny"
[[regions]]
name = "eu-west"
jurisdiction = "EU"
location = { lat = 53.3, lon = -6.2 }
[[regions]]
name = "eu-central"
jurisdiction = "EU"
location = { lat = 50.1, lon = 8.6 }
[[regions]]
name = "us-east"
jurisdiction = "US"
location = { lat = 38.9, lon = -77.0 }
[[regions]]
name = "ch-zurich"
jurisdiction = "CH"
location = { lat = 47.3, lon = 8.5 }
[[backends]]
name = "b1"
region = "eu-west"
url = "http://127.0.0.1:1"
models = ["m"]
[[residency]]
name = "swiss"
countries = ["CH"]
allow_regions = ["ch-zurich"]
[[residency]]
name = "eu"
continents = ["EU"]
allow_jurisdictions = ["EU"]
[[residency]]
name = "eu-or-swiss"
allow_jurisdictions = ["EU", "CH"]
[[residency]]
name = "us-only"
allow_regions = ["us-east"]
[[tenants]]
name = "bank"
api_key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000001"]
residency = "us-only"
)";

config::SnapshotConstPtr Snap(std::string_view text = kPolicy) {
  auto r = config::LoadString(text.substr(1), "t.toml", "/tmp",
                              [](const std::string&) { return std::optional<std::string>(); });
  INFO((r.errors.empty() ? "" : r.errors[0].ToString()));
  REQUIRE(r.ok());
  return r.snapshot;
}

GeoInfo At(const char* country, const char* continent) {
  GeoInfo g;
  g.found = true;
  std::snprintf(g.country, sizeof g.country, "%s", country);
  std::snprintf(g.continent, sizeof g.continent, "%s", continent);
  return g;
}

std::string Names(const config::Snapshot& s, const config::RegionSet& set) {
  return routing::RegionNames(s, set);
}

}  // namespace

TEST_CASE("a placed client gets the first matching rule", "[residency]") {
  auto s = Snap();
  auto de = DecideResidency(*s, At("DE", "EU"), nullptr, std::nullopt);
  CHECK(de.outcome == ResidencyOutcome::kAllowed);
  CHECK(de.governed);
  CHECK(de.source == ResidencySource::kGeography);
  CHECK(de.RuleLabel(*s) == "eu");
  CHECK(Names(*s, de.allowed) == "eu-west,eu-central");

  // Switzerland is on the EU continent, but the country rule comes first.
  auto ch = DecideResidency(*s, At("CH", "EU"), nullptr, std::nullopt);
  CHECK(ch.RuleLabel(*s) == "swiss");
  CHECK(Names(*s, ch.allowed) == "ch-zurich");
}

TEST_CASE("a placed client no rule matches is not governed", "[residency]") {
  auto s = Snap();
  auto us = DecideResidency(*s, At("US", "NA"), nullptr, std::nullopt);
  CHECK(us.outcome == ResidencyOutcome::kAllowed);
  CHECK_FALSE(us.governed);
  CHECK(us.RuleLabel(*s) == "none");
  CHECK(us.allowed.count() == 4);
}

TEST_CASE("rules without countries or continents never match by geography", "[residency]") {
  auto s = Snap();
  // "eu-or-swiss" and "us-only" name no geography: a client anywhere never lands on them.
  for (auto [c, k] : {std::pair{"FR", "EU"}, {"US", "NA"}, {"JP", "AS"}, {"CH", "EU"}}) {
    auto d = DecideResidency(*s, At(c, k), nullptr, std::nullopt);
    CHECK(d.RuleLabel(*s) != "eu-or-swiss");
    CHECK(d.RuleLabel(*s) != "us-only");
  }
}

TEST_CASE("a tenant's forced rule wins over geography", "[residency]") {
  auto s = Snap();
  const config::Tenant& bank = s->tenants[0];
  auto d = DecideResidency(*s, At("DE", "EU"), &bank, std::nullopt);
  CHECK(d.source == ResidencySource::kTenant);
  CHECK(d.RuleLabel(*s) == "us-only");
  CHECK(Names(*s, d.allowed) == "us-east");
  // ...also for a client the database cannot place.
  auto u = DecideResidency(*s, GeoInfo{}, &bank, std::nullopt);
  CHECK(Names(*s, u.allowed) == "us-east");
}

TEST_CASE("unknown clients: deny by default, or the named rule", "[residency]") {
  auto s = Snap();
  auto d = DecideResidency(*s, GeoInfo{}, nullptr, std::nullopt);
  CHECK(d.outcome == ResidencyOutcome::kDenied);
  CHECK(d.governed);
  CHECK(d.RuleLabel(*s) == "deny");
  CHECK(d.allowed.empty());

  std::string text(kPolicy);
  text.replace(text.find("unknown = \"deny\""), 16, "unknown = \"eu-or-swiss\"");
  auto s2 = Snap(text);
  auto u = DecideResidency(*s2, GeoInfo{}, nullptr, std::nullopt);
  CHECK(u.outcome == ResidencyOutcome::kAllowed);
  CHECK(u.source == ResidencySource::kUnknownClient);
  CHECK(u.RuleLabel(*s2) == "eu-or-swiss");
  CHECK(Names(*s2, u.allowed) == "eu-west,eu-central,ch-zurich");
}

TEST_CASE("x-geogate-residency narrows and never widens", "[residency]") {
  auto s = Snap();
  // Ungoverned client narrows to EU.
  auto us = DecideResidency(*s, At("US", "NA"), nullptr, std::string_view("EU"));
  CHECK(us.outcome == ResidencyOutcome::kAllowed);
  CHECK(us.narrowed);
  CHECK(Names(*s, us.allowed) == "eu-west,eu-central");
  // An EU client naming US: the intersection is empty -> denied (451), not widened.
  auto de = DecideResidency(*s, At("DE", "EU"), nullptr, std::string_view("US"));
  CHECK(de.outcome == ResidencyOutcome::kDenied);
  CHECK(de.allowed.empty());
  // An EU client naming EU stays in the EU.
  auto de2 = DecideResidency(*s, At("DE", "EU"), nullptr, std::string_view(" EU "));
  CHECK(Names(*s, de2.allowed) == "eu-west,eu-central");
  // An unknown jurisdiction is a bad header (400), whoever asks.
  auto bad = DecideResidency(*s, At("DE", "EU"), nullptr, std::string_view("MARS"));
  CHECK(bad.outcome == ResidencyOutcome::kBadHeader);
  CHECK(bad.allowed.empty());
  // The deny of unknown clients cannot be narrowed into something.
  auto unknown = DecideResidency(*s, GeoInfo{}, nullptr, std::string_view("EU"));
  CHECK(unknown.outcome == ResidencyOutcome::kDenied);
}

TEST_CASE("the residency reason says which rule, from where, and any narrowing", "[residency]") {
  auto s = Snap();
  CHECK(DecideResidency(*s, At("DE", "EU"), nullptr, std::nullopt).Reason(*s) ==
        "rule 'eu' (geography)");
  const config::Tenant* bank = &s->tenants[0];
  CHECK(DecideResidency(*s, At("DE", "EU"), bank, std::nullopt).Reason(*s) ==
        "rule 'us-only' (tenant)");
  CHECK(DecideResidency(*s, At("BR", "SA"), nullptr, std::nullopt).Reason(*s) ==
        "no residency rule matches the client");
  CHECK(DecideResidency(*s, GeoInfo{}, nullptr, std::nullopt).Reason(*s) ==
        "client location unknown and geo.unknown = \"deny\"");
  CHECK(DecideResidency(*s, At("DE", "EU"), nullptr, std::string_view(" EU ")).Reason(*s) ==
        "rule 'eu' (geography), narrowed to EU");
  CHECK(DecideResidency(*s, At("DE", "EU"), nullptr, std::string_view("US")).Reason(*s) ==
        "rule 'eu' (geography), narrowed to US: no region left");
  CHECK(DecideResidency(*s, At("DE", "EU"), nullptr, std::string_view("MARS")).Reason(*s) ==
        "x-geogate-residency names unknown jurisdiction 'MARS'");
}
