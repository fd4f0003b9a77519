// [[residency]] rules and [[tenants]]: who may be served where.
#include <algorithm>
#include <array>
#include <limits>

#include "absl/strings/str_cat.h"
#include "config/sections.h"
#include "config/value_checks.h"

namespace geogate::config {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::array<std::string_view, 7> kContinents = {"AF", "AN", "AS", "EU", "NA", "OC", "SA"};

bool IsCountryCode(const std::string& s) {
  return s.size() == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z';
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::array<uint8_t, 32>> DecodeSha256(const std::string& hex) {
  if (hex.size() != 64) return std::nullopt;
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < 32; ++i) {
    int hi = HexDigit(hex[2 * i]), lo = HexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

std::vector<std::string> ReadNameList(TableReader& t, std::string_view key, std::vector<Pos>& pos) {
  std::vector<std::string> out;
  if (auto list = t.StringArray(key)) {
    for (auto& v : *list) {
      out.push_back(std::move(v.value));
      pos.push_back(v.pos);
    }
  }
  return out;
}

void ReadRule(TableReader& t, Draft& d) {
  ResidencyRule r;
  Draft::RuleRefs refs;
  refs.table = refs.name = t.pos();
  if (auto name = t.String("name", Presence::kRequired)) {
    refs.name = name->pos;
    if (CheckIdentifier(t, "name", *name)) r.name = name->value;
  }
  if (auto countries = t.StringArray("countries")) {
    for (auto& c : *countries) {
      if (!IsCountryCode(c.value)) {
        t.diag().Error(c.pos, absl::StrCat("entry of ", t.Describe("countries"),
                                           " must be an ISO 3166-1 alpha-2 code in upper case "
                                           "like \"DE\", got \"",
                                           c.value, "\""));
        continue;
      }
      r.countries.push_back(std::move(c.value));
      refs.countries.push_back(c.pos);
    }
  }
  if (auto continents = t.StringArray("continents")) {
    for (auto& c : *continents) {
      if (std::find(kContinents.begin(), kContinents.end(), c.value) == kContinents.end()) {
        t.diag().Error(c.pos,
                       absl::StrCat("entry of ", t.Describe("continents"),
                                    " must be one of AF AN AS EU NA OC SA, got \"", c.value, "\""));
        continue;
      }
      r.continents.push_back(std::move(c.value));
      refs.continents.push_back(c.pos);
    }
  }
  r.allow_regions = ReadNameList(t, "allow_regions", refs.allow_regions);
  r.allow_jurisdictions = ReadNameList(t, "allow_jurisdictions", refs.allow_jurisdictions);
  t.ReportUnknownKeys();
  d.snap.residency.push_back(std::move(r));
  d.rules.push_back(std::move(refs));
}

void ReadTenant(TableReader& t, Draft& d) {
  Tenant tn;
  Draft::TenantRefs refs;
  refs.table = refs.name = refs.residency = t.pos();
  if (auto name = t.String("name", Presence::kRequired)) {
    refs.name = name->pos;
    if (CheckIdentifier(t, "name", *name)) tn.name = name->value;
  }
  if (auto keys = t.StringArray("api_key_sha256", Presence::kRequired)) {
    if (keys->empty()) {
      t.diag().Error(
          PosOf(*t.Node("api_key_sha256")),
          absl::StrCat(t.Describe("api_key_sha256"), " must list at least one key hash"));
    }
    for (const auto& k : *keys) {
      // Never echo the value: an operator may have pasted the key itself.
      auto hash = DecodeSha256(k.value);
      if (!hash) {
        t.diag().Error(k.pos, absl::StrCat("entry of ", t.Describe("api_key_sha256"),
                                           " must be 64 hex characters (the SHA-256 of the key, "
                                           "not the key), got ",
                                           k.value.size(), " characters"));
        continue;
      }
      tn.api_key_sha256.push_back(*hash);
      refs.keys.push_back(k.pos);
    }
  }
  if (auto residency = t.String("residency")) {
    tn.residency = residency->value;  // resolved by Validate()
    refs.residency = residency->pos;
  }
  t.Set("allow_spot", tn.allow_spot);
  if (auto rps = t.Number("requests_per_second", 0, kInf)) tn.requests_per_second = rps->value;
  if (auto burst = t.Number("burst", 0, kInf)) tn.burst = burst->value;
  t.SetInt("max_concurrent", tn.max_concurrent, 0);
  if (auto budget = t.Number("monthly_budget", 0, kInf)) tn.monthly_budget = budget->value;
  t.ReportUnknownKeys();
  d.snap.tenants.push_back(std::move(tn));
  d.tenants.push_back(std::move(refs));
}

}  // namespace

void ReadResidency(TableReader& root, Draft& d) {
  for (TableReader& t : root.TableArray("residency"))
    ReadRule(t, d);
}

void ReadTenants(TableReader& root, Draft& d) {
  for (TableReader& t : root.TableArray("tenants"))
    ReadTenant(t, d);
}

}  // namespace geogate::config
