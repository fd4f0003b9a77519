// One "name: value\r\n" line appended to the text of a head the gateway
// writes itself (the upstream request's fields, the client's response
// head), in one append of the string: four appends, each with its own
// capacity check and copy, cost about 110 instructions a line.
#pragma once

#include <string_view>

#include "common/block_cache.h"

namespace geogate::proxy {

/// Appends `name`, ": ", `value` and CRLF to `out`.
void AppendHeaderLine(common::PooledString& out, std::string_view name, std::string_view value);

}  // namespace geogate::proxy
