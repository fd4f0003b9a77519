#include "common/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "common/json.h"

namespace geogate::common {

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
  boost::json::object line{
      {"ts", ts}, {"level", level}, {"component", component}, {"msg", message}};
  for (const LogField& f : fields)
    std::visit([&](const auto& v) { line.emplace(f.key, v); }, f.value);
  std::string text = SerializeJson(line);
  text += '\n';
  std::lock_guard<std::mutex> lock(g_mu);
  ssize_t unused = ::write(STDERR_FILENO, text.data(), text.size());
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

}  // namespace geogate::common
