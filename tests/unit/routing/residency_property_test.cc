// The residency promise as a property: for every generated combination of
// policy, client geography, tenant, narrowing header, health state and
// failure sequence, every backend a request reaches is in the allowed set —
// or the answer is 451/503/400 and no backend is reached at all.
//
// The allowed set is checked against an oracle written here from the rules
// as DESIGN.md states them, independent of the RegionSet machinery the
// loader and DecideResidency use.
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <sstream>

#include "config/loader.h"
#include "routing/decide.h"
#include "routing/residency.h"

using namespace geogate;

namespace {

struct CountryInfo {
  const char* country;
  const char* continent;
};
constexpr CountryInfo kCountries[] = {{"DE", "EU"}, {"FR", "EU"}, {"CH", "EU"}, {"GB", "EU"},
                                      {"US", "NA"}, {"CA", "NA"}, {"BR", "SA"}, {"IN", "AS"},
                                      {"JP", "AS"}, {"AU", "OC"}, {"ZA", "AF"}};
constexpr const char* kJurisdictions[] = {"EU", "US", "IN", "UK", "CH", "JP"};
constexpr const char* kContinents[] = {"EU", "NA", "SA", "AS", "OC", "AF"};
constexpr const char* kModels[] = {"m1", "m2", "m3"};
constexpr const char* kTiers[] = {"reserved", "on-demand", "spot"};

struct RuleSpec {
  std::vector<std::string> countries, continents, allow_regions, allow_jurisdictions;
};
struct TenantSpec {
  int rule = -1;  // forced rule index or -1
  bool allow_spot = false;
  std::string key_hex;
};
struct RegionSpec {
  std::string name, jurisdiction;
};
struct BackendSpec {
  int region;
  std::set<std::string> models;
  int tier;
};
struct Policy {
  std::vector<RegionSpec> regions;
  std::vector<BackendSpec> backends;
  std::vector<RuleSpec> rules;
  std::vector<TenantSpec> tenants;
  int unknown_rule = -1;  // -1 = deny
};

template <class T>
std::string List(const std::vector<T>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << '"' << v[i] << '"';
  out << "]";
  return out.str();
}

Policy Generate(std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto coin = [&](int pct) { return static_cast<int>(rng() % 100) < pct; };
  Policy p;
  size_t nregions = 1 + pick(6);
  for (size_t i = 0; i < nregions; ++i)
    p.regions.push_back({"r" + std::to_string(i), kJurisdictions[pick(std::size(kJurisdictions))]});
  size_t nbackends = 1 + pick(10);
  for (size_t i = 0; i < nbackends; ++i) {
    BackendSpec b{static_cast<int>(pick(nregions)), {}, static_cast<int>(pick(3))};
    for (const char* m : kModels)
      if (coin(60)) b.models.insert(m);
    if (b.models.empty()) b.models.insert(kModels[pick(3)]);
    p.backends.push_back(b);
  }
  std::set<std::string> used_j;
  for (const auto& r : p.regions) used_j.insert(r.jurisdiction);
  std::vector<std::string> jurisdictions(used_j.begin(), used_j.end());
  size_t nrules = pick(5);
  for (size_t i = 0; i < nrules; ++i) {
    RuleSpec r;
    for (const auto& c : kCountries)
      if (coin(15)) r.countries.push_back(c.country);
    for (const char* k : kContinents)
      if (coin(12)) r.continents.push_back(k);
    for (const auto& reg : p.regions)
      if (coin(30)) r.allow_regions.push_back(reg.name);
    for (const auto& j : jurisdictions)
      if (coin(30)) r.allow_jurisdictions.push_back(j);
    if (r.allow_regions.empty() && r.allow_jurisdictions.empty())
      r.allow_regions.push_back(p.regions[pick(nregions)].name);
    p.rules.push_back(r);
  }
  if (!p.rules.empty() && coin(50)) p.unknown_rule = static_cast<int>(pick(p.rules.size()));
  size_t ntenants = pick(4);
  for (size_t i = 0; i < ntenants; ++i) {
    TenantSpec t;
    t.rule = !p.rules.empty() && coin(50) ? static_cast<int>(pick(p.rules.size())) : -1;
    t.allow_spot = coin(50);
    char hex[65];
    std::snprintf(hex, sizeof hex, "%064zx", i + 1);
    t.key_hex = hex;
    p.tenants.push_back(t);
  }
  return p;
}

std::string Render(const Policy& p) {
  std::ostringstream t;
  t << "[gateway]\nedge = \"e\"\nlocation = { lat = 0.0, lon = 0.0 }\n"
    << "[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\n"
    << "[geo]\nunknown = \"" << (p.unknown_rule < 0 ? "deny" : "rule" + std::to_string(p.unknown_rule))
    << "\"\n";
  for (const auto& r : p.regions)
    t << "[[regions]]\nname = \"" << r.name << "\"\njurisdiction = \"" << r.jurisdiction
      << "\"\nlocation = { lat = 1.0, lon = 1.0 }\n";
  for (size_t i = 0; i < p.backends.size(); ++i) {
    const auto& b = p.backends[i];
    std::vector<std::string> models(b.models.begin(), b.models.end());
    t << "[[backends]]\nname = \"b" << i << "\"\nregion = \"" << p.regions[b.region].name
      << "\"\nurl = \"http://127.0.0.1:" << 1000 + i << "\"\nmodels = " << List(models)
      << "\ntier = \"" << kTiers[b.tier] << "\"\ncapacity = 4\n";
  }
  for (size_t i = 0; i < p.rules.size(); ++i) {
    const auto& r = p.rules[i];
    t << "[[residency]]\nname = \"rule" << i << "\"\n";
    if (!r.countries.empty()) t << "countries = " << List(r.countries) << "\n";
    if (!r.continents.empty()) t << "continents = " << List(r.continents) << "\n";
    if (!r.allow_regions.empty()) t << "allow_regions = " << List(r.allow_regions) << "\n";
    if (!r.allow_jurisdictions.empty())
      t << "allow_jurisdictions = " << List(r.allow_jurisdictions) << "\n";
  }
  for (size_t i = 0; i < p.tenants.size(); ++i) {
    const auto& tn = p.tenants[i];
    t << "[[tenants]]\nname = \"t" << i << "\"\napi_key_sha256 = [\"" << tn.key_hex << "\"]\n"
      << "allow_spot = " << (tn.allow_spot ? "true" : "false") << "\n";
    if (tn.rule >= 0) t << "residency = \"rule" << tn.rule << "\"\n";
  }
  return t.str();
}

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// --- the oracle -------------------------------------------------------------
enum class Verdict { kAllowed, kDenied, kBadHeader };
struct OracleResult {
  Verdict verdict;
  std::vector<bool> allowed;  // per region
};

OracleResult Oracle(const Policy& p, const CountryInfo* where, int tenant,
                    const std::string* header) {
  int rule = -2;  // -2 ungoverned, -1 deny
  if (tenant >= 0 && p.tenants[tenant].rule >= 0) {
    rule = p.tenants[tenant].rule;
  } else if (where != nullptr) {
    for (size_t i = 0; i < p.rules.size(); ++i) {
      if (Has(p.rules[i].countries, where->country) || Has(p.rules[i].continents, where->continent)) {
        rule = static_cast<int>(i);
        break;
      }
    }
  } else {
    rule = p.unknown_rule;
  }
  OracleResult out{Verdict::kAllowed, std::vector<bool>(p.regions.size(), false)};
  for (size_t i = 0; i < p.regions.size(); ++i) {
    if (rule == -2)
      out.allowed[i] = true;
    else if (rule >= 0)
      out.allowed[i] = Has(p.rules[rule].allow_regions, p.regions[i].name) ||
                       Has(p.rules[rule].allow_jurisdictions, p.regions[i].jurisdiction);
  }
  if (header != nullptr) {
    bool known = false;
    for (const auto& r : p.regions) known = known || r.jurisdiction == *header;
    if (!known) return {Verdict::kBadHeader, std::vector<bool>(p.regions.size(), false)};
    for (size_t i = 0; i < p.regions.size(); ++i)
      out.allowed[i] = out.allowed[i] && p.regions[i].jurisdiction == *header;
  }
  bool any = false;
  for (bool a : out.allowed) any = any || a;
  if (!any) out.verdict = Verdict::kDenied;
  return out;
}

class VectorHealth final : public routing::HealthView {
 public:
  explicit VectorHealth(std::vector<routing::BackendObservation> obs) : obs_(std::move(obs)) {}
  routing::BackendObservation Observe(size_t b, uint64_t) const override { return obs_[b]; }

 private:
  std::vector<routing::BackendObservation> obs_;
};

}  // namespace

TEST_CASE("residency holds for 100k generated requests, on every attempt", "[residency][property]") {
  std::mt19937_64 rng(20261130);
  constexpr int kPolicies = 400;
  constexpr int kRequestsPerPolicy = 300;
  size_t cases = 0, routed = 0, denied = 0, unavailable = 0, bad_header = 0, attempts = 0;
  for (int pi = 0; pi < kPolicies; ++pi) {
    Policy p = Generate(rng);
    std::string text = Render(p);
    auto loaded = config::LoadString(text, "gen.toml", "/tmp",
                                     [](const std::string&) { return std::optional<std::string>(); });
    INFO(text);
    INFO((loaded.errors.empty() ? std::string() : loaded.errors.front().ToString()));
    REQUIRE(loaded.ok());
    const config::Snapshot& snap = *loaded.snapshot;
    for (int ri = 0; ri < kRequestsPerPolicy; ++ri, ++cases) {
      // Client geography: placed (some country) or unknown.
      const CountryInfo* where =
          rng() % 5 == 0 ? nullptr : &kCountries[rng() % std::size(kCountries)];
      routing::GeoInfo geo;
      if (where) {
        geo.found = true;
        std::snprintf(geo.country, sizeof geo.country, "%s", where->country);
        std::snprintf(geo.continent, sizeof geo.continent, "%s", where->continent);
      }
      int tenant = p.tenants.empty() || rng() % 2 == 0 ? -1 : static_cast<int>(rng() % p.tenants.size());
      std::string header_value;
      const std::string* header = nullptr;
      if (rng() % 4 == 0) {
        header_value = rng() % 8 == 0 ? "MARS" : kJurisdictions[rng() % std::size(kJurisdictions)];
        header = &header_value;
      }
      const config::Tenant* tcfg = tenant >= 0 ? &snap.tenants[tenant] : nullptr;
      auto decision = routing::DecideResidency(
          snap, geo, tcfg, header ? std::optional<std::string_view>(*header) : std::nullopt);
      OracleResult oracle = Oracle(p, where, tenant, header);

      // The allowed set is exactly the oracle's.
      for (size_t r = 0; r < p.regions.size(); ++r) REQUIRE(decision.allowed.contains(r) == oracle.allowed[r]);
      if (oracle.verdict == Verdict::kBadHeader) {
        REQUIRE(decision.outcome == routing::ResidencyOutcome::kBadHeader);
        ++bad_header;
        continue;
      }
      if (oracle.verdict == Verdict::kDenied) {
        REQUIRE(decision.outcome == routing::ResidencyOutcome::kDenied);
        ++denied;
        continue;
      }
      REQUIRE(decision.outcome == routing::ResidencyOutcome::kAllowed);

      // Health: random states, ejections, load.
      std::vector<routing::BackendObservation> obs(snap.backends.size());
      for (auto& o : obs) {
        uint64_t x = rng();
        o.state = x % 4 == 0 ? health::HealthState::kUnhealthy
                  : x % 11 == 0 ? health::HealthState::kUnknown
                                : health::HealthState::kHealthy;
        o.ejected = (x >> 8) % 9 == 0;
        o.inflight = static_cast<uint32_t>((x >> 16) % 6);
        o.rtt_ms = static_cast<double>((x >> 24) % 200);
        o.ttft_ms = (x >> 32) % 3 == 0 ? -1 : static_cast<double>((x >> 34) % 300);
      }
      VectorHealth view(obs);
      size_t model = rng() % snap.models.size();
      routing::RequestFacts facts{model, tcfg};
      routing::Decision d = routing::Decide(snap, facts, decision.allowed, view, rng());

      // Independent expectation of the outcome.
      bool any_serving_allowed = false, any_routable = false, any_room = false;
      for (size_t b = 0; b < p.backends.size(); ++b) {
        const auto& bs = p.backends[b];
        if (!oracle.allowed[bs.region] || !bs.models.count(snap.models[model].name)) continue;
        if (bs.tier == 2 && !(tenant >= 0 && p.tenants[tenant].allow_spot)) continue;
        any_serving_allowed = true;
        if (!obs[b].routable()) continue;
        any_routable = true;
        if (obs[b].inflight < 4) any_room = true;
      }
      routing::Outcome expected = !any_serving_allowed ? routing::Outcome::kResidencyDenied
                                  : !any_routable      ? routing::Outcome::kNoHealthy
                                  : !any_room          ? routing::Outcome::kCapacity
                                                       : routing::Outcome::kRoute;
      REQUIRE(d.outcome == expected);
      if (d.outcome != routing::Outcome::kRoute) {
        REQUIRE(d.plan.empty());
        ++unavailable;
        continue;
      }
      // A failure sequence: each attempt fails with probability 1/2, up to
      // max_attempts (as the proxy's attempt loop walks the plan). Every
      // backend touched is allowed, serves the model, and is tried once.
      std::set<size_t> tried;
      size_t max_attempts = 1 + rng() % 4;
      for (size_t a = 0; a < std::min(max_attempts, d.plan.size()); ++a) {
        size_t b = d.plan[a];
        ++attempts;
        REQUIRE(oracle.allowed[p.backends[b].region]);
        REQUIRE(p.backends[b].models.count(snap.models[model].name) == 1);
        REQUIRE(tried.insert(b).second);
        if (rng() % 2 == 0) break;  // this attempt succeeded
      }
      ++routed;
    }
  }
  INFO("routed " << routed << ", denied " << denied << ", unavailable " << unavailable
                 << ", bad header " << bad_header << ", attempts " << attempts);
  CHECK(cases >= 100000);
  // The generator must exercise every branch, or the property proves little.
  CHECK(routed > 10000);
  CHECK(denied > 1000);
  CHECK(unavailable > 1000);
  CHECK(bad_header > 500);
}
