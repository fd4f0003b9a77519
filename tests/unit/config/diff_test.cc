// RestartRequiredChanges: what a SIGHUP cannot apply (DESIGN.md §7).
#include <catch2/catch.hpp>

#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

using testing::TempDir;

SnapshotConstPtr MustLoad(const std::string& text, const std::string& base_dir = "/") {
  LoadResult r = LoadString(text, "t.toml", base_dir, testing::FakeEnv());
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  return r.snapshot;
}

const std::string kBase = R"(
[gateway]
workers = 2
[[gateway.listeners]]
address = "0.0.0.0:8080"
[[gateway.listeners]]
address = "[::]:8443"
proxy_protocol = true
[gateway.admin]
address = "127.0.0.1:9901"
)";

TEST_CASE("identical configs need no restart", "[config][diff]") {
  auto a = MustLoad(kBase);
  auto b = MustLoad(kBase);
  CHECK(RestartRequiredChanges(*a, *b).empty());
}

TEST_CASE("everything outside listeners, admin and workers reloads", "[config][diff]") {
  auto a = MustLoad(kBase);
  auto b = MustLoad(kBase + R"(
[gateway.limits]
max_body_bytes = 1
[gateway.upstream]
max_attempts = 5
[health]
interval_ms = 1000
[routing]
tie_ms = 9
)");
  CHECK(RestartRequiredChanges(*a, *b).empty());
}

TEST_CASE("the same address written differently is the same listener", "[config][diff]") {
  auto a = MustLoad(kBase);
  std::string respelled = kBase;
  respelled.replace(respelled.find("0.0.0.0:8080"), 12, "0.0.0.0:08080");
  respelled.replace(respelled.find("[::]:8443"), 9, "[0::0]:8443");
  auto b = MustLoad(respelled);
  CHECK(RestartRequiredChanges(*a, *b).empty());
}

TEST_CASE("listener order does not matter", "[config][diff]") {
  auto a = MustLoad(kBase);
  auto b = MustLoad(R"(
[gateway]
workers = 2
[[gateway.listeners]]
address = "[::]:8443"
proxy_protocol = true
[[gateway.listeners]]
address = "0.0.0.0:8080"
)");
  CHECK(RestartRequiredChanges(*a, *b).empty());
}

TEST_CASE("listeners added, removed, TLS and proxy_protocol toggled", "[config][diff]") {
  TempDir dir;
  dir.Write("a.pem");
  dir.Write("a.key");
  auto a = MustLoad(kBase);
  auto b = MustLoad(R"(
[gateway]
workers = 2
[[gateway.listeners]]
address = "0.0.0.0:8080"
tls = { cert = "a.pem", key = "a.key" }
[[gateway.listeners]]
address = "[::]:8443"
[[gateway.listeners]]
address = "0.0.0.0:9000"
)",
                    dir.str());
  auto changes = RestartRequiredChanges(*a, *b);
  std::vector<std::string> expected = {
      "listener 0.0.0.0:8080 turned TLS on",
      "listener [::]:8443 turned proxy_protocol off",
      "listener 0.0.0.0:9000 was added",
  };
  CHECK(changes == expected);

  auto back = RestartRequiredChanges(*b, *a);
  std::vector<std::string> expected_back = {
      "listener 0.0.0.0:8080 turned TLS off",
      "listener [::]:8443 turned proxy_protocol on",
      "listener 0.0.0.0:9000 was removed",
  };
  CHECK(back == expected_back);
}

TEST_CASE("a moved listener is one removal and one addition", "[config][diff]") {
  auto a = MustLoad("[[gateway.listeners]]\naddress = \"0.0.0.0:8080\"\n");
  auto b = MustLoad("[[gateway.listeners]]\naddress = \"0.0.0.0:8081\"\n");
  std::vector<std::string> expected = {"listener 0.0.0.0:8080 was removed",
                                       "listener 0.0.0.0:8081 was added"};
  CHECK(RestartRequiredChanges(*a, *b) == expected);
}

TEST_CASE("TLS certificate and key paths reload without a restart", "[config][diff]") {
  TempDir dir;
  dir.Write("a.pem");
  dir.Write("a.key");
  dir.Write("b.pem");
  dir.Write("b.key");
  auto a = MustLoad(R"(
[[gateway.listeners]]
address = "0.0.0.0:8443"
tls = { cert = "a.pem", key = "a.key" }
)",
                    dir.str());
  auto b = MustLoad(R"(
[[gateway.listeners]]
address = "0.0.0.0:8443"
tls = { cert = "b.pem", key = "b.key" }
)",
                    dir.str());
  CHECK(RestartRequiredChanges(*a, *b).empty());
}

TEST_CASE("admin address and worker count", "[config][diff]") {
  auto a = MustLoad(kBase);
  std::string changed = kBase;
  changed.replace(changed.find("127.0.0.1:9901"), 14, "127.0.0.1:9902");
  changed.replace(changed.find("workers = 2"), 11, "workers = 0");
  auto b = MustLoad(changed);
  std::vector<std::string> expected = {
      "admin address changed from 127.0.0.1:9901 to 127.0.0.1:9902",
      "workers changed from 2 to 0",
  };
  CHECK(RestartRequiredChanges(*a, *b) == expected);
}

TEST_CASE("an admin address left to its default equals it written out", "[config][diff]") {
  auto a = MustLoad("[[gateway.listeners]]\naddress = \"0.0.0.0:8080\"\n");
  auto b = MustLoad(
      "[[gateway.listeners]]\naddress = \"0.0.0.0:8080\"\n[gateway.admin]\naddress = "
      "\"127.0.0.1:9901\"\n");
  CHECK(RestartRequiredChanges(*a, *b).empty());
}

}  // namespace
}  // namespace geogate::config
