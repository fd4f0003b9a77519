// Data residency (DESIGN.md §4 step 5, §7 "Residency"): a pure function from
// the snapshot and the request's facts to the set of regions the request may
// be served from, and the rule that produced it. Selection builds its
// candidate list from this set and nothing else, so no retry, failover or
// reload path can leave it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/region_set.h"
#include "config/snapshot.h"
#include "routing/geo_resolver.h"

namespace geogate::routing {

enum class ResidencyOutcome : uint8_t {
  kAllowed,    // `allowed` is non-empty
  kDenied,     // policy allows no region (451)
  kBadHeader,  // x-geogate-residency names an unknown jurisdiction (400)
};
const char* ResidencyOutcomeName(ResidencyOutcome o);

/// Where the governing rule came from.
enum class ResidencySource : uint8_t { kNone, kTenant, kGeography, kUnknownClient };
const char* ResidencySourceName(ResidencySource s);

struct ResidencyDecision {
  ResidencyOutcome outcome = ResidencyOutcome::kAllowed;
  config::RegionSet allowed;
  std::optional<size_t> rule;  // index of the rule that governs; nullopt = ungoverned or deny
  ResidencySource source = ResidencySource::kNone;
  bool governed = false;  // a rule (or the unknown-client deny) restricts the request
  bool narrowed = false;  // the client's header narrowed the set
  /// The jurisdiction x-geogate-residency named (narrowed to, or unknown).
  std::string jurisdiction;

  /// Human-readable, for error messages: e.g. "rule 'eu' (geography),
  /// narrowed to EU". Rendered on demand: deciding allocates nothing.
  std::string Reason(const config::Snapshot& snap) const;

  /// The rule's name, "deny" for unplaced clients under geo.unknown = deny,
  /// or "none" for ungoverned requests: the metric/log label.
  std::string_view RuleLabel(const config::Snapshot& snap) const;
};

/// @param geo where the database placed the client (found = false: unknown).
/// @param tenant the authenticated tenant, or null.
/// @param narrowing the value of x-geogate-residency, if the client sent one.
ResidencyDecision DecideResidency(const config::Snapshot& snap, const GeoInfo& geo,
                                  const config::Tenant* tenant,
                                  std::optional<std::string_view> narrowing);

/// Comma-separated names of the regions in `set` (for logs and admin).
std::string RegionNames(const config::Snapshot& snap, const config::RegionSet& set);

}  // namespace geogate::routing
