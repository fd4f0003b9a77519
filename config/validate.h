// Cross-references between sections (backend -> region, rule -> regions and
// jurisdictions, tenant -> rule, geo.unknown -> rule, model aliases), the
// uniqueness of names, and the derived lookup tables of the Snapshot.
#pragma once

#include "config/draft.h"

namespace geogate::config {

/// Resolves every reference in `draft.snap`, reporting what does not resolve
/// at the position recorded by the readers, and fills the derived tables.
void Validate(Draft& draft, ReadContext& ctx);

}  // namespace geogate::config
