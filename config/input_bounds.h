// Bounds on the config text before toml++ sees it. toml++ builds and
// destroys nested tables and arrays recursively, so a file of 100 KB whose
// last line is a dotted key of 50,000 parts overflowed the stack of
// `--check`, SIGHUP and POST /admin/reload (issue #18). No config input may
// crash check, start or reload (DESIGN.md §8): the loader refuses text over
// kMaxConfigBytes, and text nested deeper than kMaxNestingDepth, with the
// position of the key or bracket that goes too deep.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "config/diagnostics.h"

namespace geogate::config {

/// Largest config file read: ten thousand tenants with a key each fit in
/// 2 MiB; anything near the limit is a mistake (a log file named by
/// --config) rather than a config.
inline constexpr size_t kMaxConfigBytes = size_t{16} << 20;

/// Deepest nesting accepted. geogate's schema needs 5 levels
/// ([[gateway.listeners]] tls = { cert }); 32 leaves room for typos that
/// validation then names as unknown keys, and keeps toml++'s recursion a few
/// kilobytes of stack.
inline constexpr size_t kMaxNestingDepth = 32;

struct InputBoundsProblem {
  Pos pos;  // {0, 0}: the whole file (its size)
  std::string message;
};

/// The first place where `text` breaks a bound, or nullopt. Depth counts one
/// level per part of a dotted key (in a `[table]` header, a `[[array]]`
/// header, or a `key = value` line, whose parts add to its table's), one per
/// array of tables on a header's path (bounded from above by the lengths of
/// the `[[headers]]` seen so far), and one per enclosing array or inline
/// table.
///
/// The scan knows TOML's lexical structure (strings of the four kinds,
/// comments, keys, brackets) and nothing of its values; text that is not
/// TOML is left for toml++ to report. Where the scan meets something that
/// cannot continue a TOML document, it stops: toml++ stops there too, so
/// nothing after it is ever built.
std::optional<InputBoundsProblem> CheckInputBounds(std::string_view text);

}  // namespace geogate::config
