// What the section readers hand to validation: the Snapshot as read, plus the
// positions of every value that cross-reference checks may need to point at.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "config/diagnostics.h"
#include "config/loader.h"
#include "config/snapshot.h"

namespace geogate::config {

struct ReadContext {
  Diagnostics& diag;
  std::filesystem::path base_dir;  // absolute; relative paths in the file resolve here
  const EnvLookup& env;
  LoadMode mode = LoadMode::kFull;
};

struct Draft {
  Snapshot snap;

  std::optional<Pos> gateway_table;  // [gateway], when present
  bool gateway_location_set = false;
  Pos geo_unknown;                    // the geo.unknown value, when written
  std::vector<Pos> listener_address;  // parallel to snap.gateway.listeners

  struct Named {
    Pos table;  // the element's [[header]]
    Pos name;   // its name value (table position when missing)
  };
  std::vector<Named> regions;  // parallel to snap.regions

  struct BackendRefs : Named {
    Pos region;
    std::vector<Pos> models;  // parallel to Backend::models as written
  };
  std::vector<BackendRefs> backends;

  struct ModelRefs : Named {
    std::vector<Pos> aliases;
  };
  std::vector<ModelRefs> models;  // the declared [[models]], parallel to snap.models

  struct RuleRefs : Named {
    std::vector<Pos> countries, continents, allow_regions, allow_jurisdictions;
  };
  std::vector<RuleRefs> rules;

  struct TenantRefs : Named {
    Pos residency;
    std::vector<Pos> keys;  // parallel to Tenant::api_key_sha256
  };
  std::vector<TenantRefs> tenants;
};

}  // namespace geogate::config
