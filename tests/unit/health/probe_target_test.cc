// Where the health probe and the load report go for a backend URL as written
// in geogate.toml: against the backend's root, the URL without a final /v1
// (DESIGN.md §8, docs/health.md). No sockets: the targets the probe client
// is built with.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "config/loader.h"
#include "health/http_probe_client.h"

namespace {

using geogate::health::HttpProbeClient;

geogate::config::LoadResult LoadWith(std::string_view url, std::string_view health) {
  std::string text = std::string(R"([[gateway.listeners]]
address = "127.0.0.1:8080"

[health]
)") + std::string(health) +
                     R"(

[[regions]]
name = "r1"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }

[[backends]]
name = "b1"
region = "r1"
url = ")" + std::string(url) +
                     R"("
models = ["m"]

[[residency]]
name = "all"
allow_regions = ["r1"]
)";
  return geogate::config::LoadString(
      text, "test.toml", "/nonexistent-geogate-base",
      [](const std::string&) -> std::optional<std::string> { return std::nullopt; });
}

}  // namespace

TEST_CASE("probe targets: health and load-report paths resolve against the backend's root",
          "[health][probe_target]") {
  struct Case {
    std::string_view url, health, load;
  };
  for (Case c : {
           Case{"http://h:8000", "/health", "/metrics"},
           Case{"http://h:8000/", "/health", "/metrics"},
           Case{"https://h/v1", "/health", "/metrics"},
           Case{"https://h/v1/", "/health", "/metrics"},
           Case{"https://h/openai/v1", "/openai/health", "/openai/metrics"},
           Case{"https://h/proxy", "/proxy/health", "/proxy/metrics"},
       }) {
    CAPTURE(c.url);
    auto r = LoadWith(c.url, R"(path = "/health"
load_report = "/metrics")");
    REQUIRE(r.ok());
    auto o = HttpProbeClient::Options::From(r.snapshot->backends[0], r.snapshot->health);
    CHECK(o.health_target == c.health);
    CHECK(o.load_target == c.load);
    CHECK_FALSE(o.json_load);
  }
}

TEST_CASE("probe targets: the default health path under a /v1 base URL", "[health][probe_target]") {
  auto r = LoadWith("https://api.example.com/v1", "");
  REQUIRE(r.ok());
  auto o = HttpProbeClient::Options::From(r.snapshot->backends[0], r.snapshot->health);
  CHECK(o.health_target == "/health");
  CHECK(o.load_target.empty());  // "auto": read from the probe body
  CHECK(o.json_load);
}
