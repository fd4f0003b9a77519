// Operational log: one JSON object per line on stderr (ts, level, component,
// msg, and any fields a call adds). Not used on the request path: requests
// go to the access log, which alone may use stdout, so that every stdout
// line is an access-log record.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <variant>

namespace geogate::common {

/// A member added after "msg", for what a reader should not have to parse
/// out of the message (a listener's address and port, say).
struct LogField {
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, int64_t v) : key(k), value(v) {}
  LogField(std::string_view k, bool v) : key(k), value(v) {}

  std::string_view key;
  std::variant<std::string_view, int64_t, bool> value;
};

void LogInfo(std::string_view component, std::string_view message,
             std::initializer_list<LogField> fields = {});
void LogWarn(std::string_view component, std::string_view message,
             std::initializer_list<LogField> fields = {});
void LogError(std::string_view component, std::string_view message,
              std::initializer_list<LogField> fields = {});

}  // namespace geogate::common
