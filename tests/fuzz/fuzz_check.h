// What the fuzz targets assert with: a property that fails aborts, which
// libFuzzer reports as a crash and keeps the input of.
#pragma once

#include <cstdlib>

namespace geogate::fuzz {

inline void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace geogate::fuzz
