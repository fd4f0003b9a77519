#include "common/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <type_traits>

#include "common/json_text.h"

namespace geogate::gateway {

namespace {

std::mutex g_mu;

void Write(const char* level, std::string_view component, std::string_view message,
           std::initializer_list<LogField> fields) {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char ts[64];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  std::string line = "{\"ts\":\"";
  line += ts;
  line += "\",\"level\":\"";
  line += level;
  line += "\",\"component\":";
  AppendJsonString(line, component);
  line += ",\"msg\":";
  AppendJsonString(line, message);
  for (const LogField& f : fields) {
    line += ',';
    AppendJsonString(line, f.key);
    line += ':';
    std::visit(
        [&line](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string_view>)
            AppendJsonString(line, v);
          else if constexpr (std::is_same_v<T, bool>)
            line += v ? "true" : "false";
          else
            line += std::to_string(v);
        },
        f.value);
  }
  line += "}\n";
  std::lock_guard<std::mutex> lock(g_mu);
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace

void LogInfo(std::string_view c, std::string_view m, std::initializer_list<LogField> f) {
  Write("info", c, m, f);
}
void LogWarn(std::string_view c, std::string_view m, std::initializer_list<LogField> f) {
  Write("warn", c, m, f);
}
void LogError(std::string_view c, std::string_view m, std::initializer_list<LogField> f) {
  Write("error", c, m, f);
}

}  // namespace geogate::gateway
