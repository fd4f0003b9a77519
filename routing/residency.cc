#include "routing/residency.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace geogate::routing {

const char* ResidencyOutcomeName(ResidencyOutcome o) {
  switch (o) {
    case ResidencyOutcome::kAllowed:
      return "allowed";
    case ResidencyOutcome::kDenied:
      return "denied";
    case ResidencyOutcome::kBadHeader:
      return "bad_header";
  }
  return "unknown";
}

const char* ResidencySourceName(ResidencySource s) {
  switch (s) {
    case ResidencySource::kNone:
      return "none";
    case ResidencySource::kTenant:
      return "tenant";
    case ResidencySource::kGeography:
      return "geography";
    case ResidencySource::kUnknownClient:
      return "unknown_client";
  }
  return "none";
}

std::string_view ResidencyDecision::RuleLabel(const config::Snapshot& snap) const {
  if (rule) return snap.residency[*rule].name;
  if (source == ResidencySource::kUnknownClient) return "deny";
  return "none";
}

namespace {

bool Contains(const std::vector<std::string>& list, std::string_view v) {
  return !v.empty() && std::find(list.begin(), list.end(), v) != list.end();
}

// A rule matches by geography only when it names countries or continents.
bool Matches(const config::ResidencyRule& rule, const GeoInfo& geo) {
  return Contains(rule.countries, geo.country) || Contains(rule.continents, geo.continent);
}

}  // namespace

ResidencyDecision DecideResidency(const config::Snapshot& snap, const GeoInfo& geo,
                                  const config::Tenant* tenant,
                                  std::optional<std::string_view> narrowing) {
  ResidencyDecision d;
  if (tenant != nullptr && tenant->residency_rule) {
    d.rule = tenant->residency_rule;
    d.source = ResidencySource::kTenant;
  } else if (geo.found) {
    for (size_t i = 0; i < snap.residency.size(); ++i) {
      if (Matches(snap.residency[i], geo)) {
        d.rule = i;
        d.source = ResidencySource::kGeography;
        break;
      }
    }
  } else {
    d.source = ResidencySource::kUnknownClient;
    d.rule = snap.geo.unknown_rule;  // nullopt = deny
  }

  if (d.rule) {
    const config::ResidencyRule& rule = snap.residency[*d.rule];
    d.allowed = rule.allowed;
    d.governed = true;
  } else if (d.source == ResidencySource::kUnknownClient) {
    d.allowed = config::RegionSet(snap.regions.size());
    d.governed = true;
  } else {
    d.allowed = snap.AllRegions();
  }

  if (narrowing) {
    absl::string_view stripped =
        absl::StripAsciiWhitespace(absl::string_view(narrowing->data(), narrowing->size()));
    d.jurisdiction.assign(stripped.data(), stripped.size());
    auto it = snap.regions_by_jurisdiction.find(stripped);
    if (it == snap.regions_by_jurisdiction.end()) {
      d.outcome = ResidencyOutcome::kBadHeader;
      d.allowed = config::RegionSet(snap.regions.size());
      return d;
    }
    d.allowed = d.allowed.intersect(it->second);
    d.narrowed = true;
  }

  if (d.allowed.empty()) d.outcome = ResidencyOutcome::kDenied;
  return d;
}

std::string ResidencyDecision::Reason(const config::Snapshot& snap) const {
  if (outcome == ResidencyOutcome::kBadHeader)
    return absl::StrCat("x-geogate-residency names unknown jurisdiction '", jurisdiction, "'");
  std::string out;
  if (rule)
    out =
        absl::StrCat("rule '", snap.residency[*rule].name, "' (", ResidencySourceName(source), ")");
  else if (source == ResidencySource::kUnknownClient)
    out = "client location unknown and geo.unknown = \"deny\"";
  else
    out = "no residency rule matches the client";
  if (narrowed) absl::StrAppend(&out, ", narrowed to ", jurisdiction);
  if (outcome == ResidencyOutcome::kDenied && narrowed) out += ": no region left";
  return out;
}

std::string RegionNames(const config::Snapshot& snap, const config::RegionSet& set) {
  std::string out;
  for (size_t i = 0; i < snap.regions.size(); ++i) {
    if (!set.contains(i)) continue;
    if (!out.empty()) out += ',';
    out += snap.regions[i].name;
  }
  return out;
}

}  // namespace geogate::routing
