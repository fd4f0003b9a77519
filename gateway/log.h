// Operational log: one JSON object per line on stderr (level, component,
// message). Not used on the request path: requests go to the access log.
#pragma once

#include <string_view>

namespace geogate::gateway {

void LogInfo(std::string_view component, std::string_view message);
void LogWarn(std::string_view component, std::string_view message);
void LogError(std::string_view component, std::string_view message);

}  // namespace geogate::gateway
