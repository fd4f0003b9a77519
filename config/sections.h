// One reader per part of geogate.toml (DESIGN.md §5). Each reads its keys
// with TableReader (types, ranges, unknown keys, local formats) into the
// Draft; references between sections are resolved later by Validate().
#pragma once

#include "config/draft.h"
#include "config/toml_reader.h"

namespace geogate::config {

/// The whole document: every section below plus the top-level keys.
void ReadDocument(const toml::table& root, ReadContext& ctx, Draft& draft);

void ReadGateway(TableReader& root, ReadContext& ctx, Draft& draft);   // read_gateway.cc
void ReadGeo(TableReader& root, ReadContext& ctx, Draft& draft);       // read_geo.cc
void ReadHealth(TableReader& root, Draft& draft);                      // read_tuning.cc
void ReadRouting(TableReader& root, Draft& draft);                     // read_tuning.cc
void ReadShowback(TableReader& root, ReadContext& ctx, Draft& draft);  // read_showback.cc
void ReadCapacity(TableReader& root, Draft& draft);                    // read_showback.cc
void ReadTracing(TableReader& root, ReadContext& ctx, Draft& draft);   // read_tracing.cc
void ReadRegions(TableReader& root, Draft& draft);                     // read_catalog.cc
void ReadBackends(TableReader& root, ReadContext& ctx, Draft& draft);  // read_catalog.cc
void ReadModels(TableReader& root, Draft& draft);                      // read_catalog.cc
void ReadResidency(TableReader& root, Draft& draft);                   // read_policy.cc
void ReadTenants(TableReader& root, Draft& draft);                     // read_policy.cc

}  // namespace geogate::config
