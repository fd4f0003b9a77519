// Checks shared by the section readers: identifiers, model names, geographic
// points and files named by the config.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/draft.h"
#include "config/toml_reader.h"

namespace geogate::config {

/// Region, backend, rule, tenant and jurisdiction names end up in metric
/// labels, response headers and log lines: letters, digits, '.', '_', '-'.
bool CheckIdentifier(const TableReader& table, std::string_view key,
                     const Located<std::string>& value);

/// Model names are matched against client requests verbatim: any printable
/// text without spaces or control characters ("meta-llama/Llama-3.1-8B").
bool CheckModelName(const TableReader& table, std::string_view key,
                    const Located<std::string>& value);

/// `key = { lat = .., lon = .. }` with lat in [-90, 90] and lon in [-180, 180].
std::optional<GeoPoint> ReadGeoPoint(TableReader& table, std::string_view key,
                                     Presence presence = Presence::kOptional);

/// Resolves a path against the config directory; returns the absolute path
/// when it names a readable regular file, else reports `what` at the value.
/// With LoadMode::kSyntaxOnly the file system is not asked.
std::optional<std::string> ResolveReadableFile(const Located<std::string>& value,
                                               std::string_view what, ReadContext& ctx);

/// "-" (stdout) and "" (off) as is; anything else resolved against the config
/// directory, whose parent directory must exist (the file is created on open;
/// not asked with LoadMode::kSyntaxOnly).
std::optional<std::string> ResolveOutputFile(const Located<std::string>& value,
                                             std::string_view what, ReadContext& ctx);

}  // namespace geogate::config
