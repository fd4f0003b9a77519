#include "common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

#include <boost/json/parse.hpp>

namespace geogate::common {
namespace {

namespace json = boost::json;

// What one log call writes to stderr (fd 2), read through a pipe.
std::string Captured(void (*write)()) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  int saved = ::dup(STDERR_FILENO);
  ::dup2(fds[1], STDERR_FILENO);
  write();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  return out;
}

TEST_CASE("a log line is one JSON object: ts, level, component, msg, then the fields", "[log]") {
  std::string line = Captured([] {
    LogWarn("reload", "config \"b.toml\" rejected\n",
            {{"generation", int64_t{7}}, {"kept_old", true}, {"path", "/etc/geogate/b.toml"}});
  });
  REQUIRE(line.size() > 1);
  CHECK(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  line.pop_back();
  json::value v = json::parse(line);
  REQUIRE(v.is_object());
  const json::object& o = v.as_object();
  std::vector<std::string> keys;
  for (const json::key_value_pair& kv : o)
    keys.emplace_back(kv.key());
  CHECK(keys == std::vector<std::string>{"ts", "level", "component", "msg", "generation",
                                         "kept_old", "path"});
  CHECK(std::regex_match(std::string(o.at("ts").as_string()),
                         std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  CHECK(o.at("level").as_string() == "warn");
  CHECK(o.at("component").as_string() == "reload");
  CHECK(o.at("msg").as_string() == "config \"b.toml\" rejected\n");
  CHECK(o.at("generation").as_int64() == 7);
  CHECK(o.at("kept_old").as_bool());
  CHECK(o.at("path").as_string() == "/etc/geogate/b.toml");
  // The text itself, after the timestamp: numbers and bools bare.
  CHECK(line.substr(line.find(R"(,"level")")) ==
        R"(,"level":"warn","component":"reload","msg":"config \"b.toml\" rejected\n",)"
        R"("generation":7,"kept_old":true,"path":"/etc/geogate/b.toml"})");
}

TEST_CASE("info and error lines carry their level", "[log]") {
  CHECK(Captured([] { LogInfo("c", "m"); }).find(R"("level":"info","component":"c","msg":"m"})") !=
        std::string::npos);
  CHECK(Captured([] { LogError("c", "m"); }).find(R"("level":"error")") != std::string::npos);
}

}  // namespace
}  // namespace geogate::common
