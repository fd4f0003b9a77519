// Probe timing jitter, pure functions of an injected random value, so that the
// probes of many backends (and of many gateways probing the same backend)
// never fall into step. Tests pass chosen or seeded values.
#pragma once

#include <chrono>
#include <cstdint>

#include "health/time_source.h"

namespace geogate::health {

/// The delay before a new session's first probe: uniform in [0, interval).
/// @param random any 64-bit value (uniformly distributed for a uniform delay).
/// @return 0 when `interval` is not positive.
Millis InitialDelay(Millis interval, uint64_t random);

/// One wait between probes: `interval` moved by up to ±jitter_percent of
/// itself, uniformly. Never less than 1 ms, so a zero interval cannot spin.
/// @param jitter_percent clamped to 100.
Millis JitteredInterval(Millis interval, uint32_t jitter_percent, uint64_t random);

}  // namespace geogate::health
