// splitmix64 (Steele, Lea and Flood 2014; Vigna's splitmix64.c): a tiny,
// fast generator with a 64-bit state, used wherever a cheap, reproducible
// stream of random bits is wanted (load spreading, tie breaks, the
// simulator's fake embeddings). Not for anything secret.
#pragma once

#include <cstdint>

namespace geogate {

/// Advances `state` and @return the generator's next output.
constexpr uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace geogate
