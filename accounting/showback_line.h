// The showback file's line format (docs/showback.md, "File format"): one
// closed minute bucket per line, a JSON object, version 1. Written by the
// ShowbackStore, read back by it on startup, and meant to be shipped as is
// to a warehouse by a scheduled job.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "accounting/showback_record.h"

namespace geogate::accounting {

/// Appends `bucket` as one JSON line, newline included. `edge` is the
/// gateway's edge name, written so lines from several edges can be merged.
void AppendShowbackLine(const ShowbackBucket& bucket, std::string_view edge, std::string& out);

/// Parses one line (without its newline). Unknown fields are ignored, so a
/// newer writer's extra fields do not make old readers drop lines.
/// @return the bucket, or what is wrong with the line.
absl::StatusOr<ShowbackBucket> ParseShowbackLine(std::string_view line);

/// RFC 3339 UTC with second precision: "2025-03-01T10:05:00Z".
std::string FormatRfc3339(int64_t unix_ms);

}  // namespace geogate::accounting
