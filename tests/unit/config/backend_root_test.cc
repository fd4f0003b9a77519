// A backend URL is an OpenAI base URL (DESIGN.md §8): its root, what goes
// before every path the gateway sends it, is the URL's path without a final
// /v1 segment (config/address.h BackendUrl::root, Backend::base_path).
#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "config/address.h"
#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

TEST_CASE("backend root: a final /v1 is the API's own, not part of the root",
          "[config][address][root]") {
  struct Case {
    std::string_view url, root;
  };
  for (Case c : {
           Case{"http://h", ""},
           Case{"http://h/", ""},
           Case{"http://h/v1", ""},
           Case{"http://h/v1/", ""},
           Case{"http://h/v1//", ""},
           Case{"https://h:8443/v1", ""},
           Case{"https://h/openai/v1", "/openai"},
           Case{"https://h/openai/v1/", "/openai"},
           Case{"https://h/a/b/v1", "/a/b"},
           Case{"https://h/proxy", "/proxy"},
           Case{"https://h/proxy/", "/proxy"},
           Case{"https://h/v1/v1", "/v1"},  // only the last one is the API's
           // Not a /v1 segment: the whole path is the root.
           Case{"https://h/v2", "/v2"},
           Case{"https://h/V1", "/V1"},  // paths are case-sensitive
           Case{"https://h/v10", "/v10"},
           Case{"https://h/apiv1", "/apiv1"},
           Case{"https://h/v1/proxy", "/v1/proxy"},
           Case{"https://h/with%20space/v1", "/with%20space"},
       }) {
    CAPTURE(c.url);
    auto u = ParseBackendUrl(c.url);
    REQUIRE(u.ok());
    CHECK(u->root == c.root);
  }
}

TEST_CASE("backend root: dot segments in a backend URL's path are refused",
          "[config][address][root]") {
  for (std::string_view url : {"http://h/a/../v1", "http://h/./v1", "http://h/v1/..",
                               "http://h/a/%2e%2E/v1", "http://h/a/%2E/v1"}) {
    CAPTURE(url);
    auto u = ParseBackendUrl(url);
    REQUIRE_FALSE(u.ok());
    CHECK_THAT(std::string(u.status().message()), Catch::Contains("dot segment"));
  }
  CHECK(ParseBackendUrl("http://h/.well-known/v1").ok());
  CHECK(ParseBackendUrl("http://h/a..b/v1").ok());
  CHECK(ParseBackendUrl("http://h/.../v1").ok());
  CHECK(ParseBackendUrl("http://h/%2e%2e%2e/v1").ok());
  CHECK(ParseBackendUrl("http://h/a%2e/v1").ok());
}

TEST_CASE("backend root: the loaded backend carries the root as its base path",
          "[config][address][root]") {
  struct Case {
    std::string_view url, base_path;
  };
  for (Case c : {Case{"https://gpu.example.com/v1/", ""}, Case{"http://10.0.0.1:8000", ""},
                 Case{"https://h/openai/v1", "/openai"}, Case{"https://h/proxy", "/proxy"}}) {
    CAPTURE(c.url);
    std::string text = std::string(R"(
[[gateway.listeners]]
address = "127.0.0.1:8080"

[[regions]]
name = "r1"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }

[[backends]]
name = "b1"
region = "r1"
url = ")") + std::string(c.url) +
                       R"("
models = ["m"]

[[residency]]
name = "all"
allow_regions = ["r1"]
)";
    LoadResult r = testing::Load(text);
    INFO(testing::Describe(r));
    REQUIRE(r.ok());
    const Backend& b = r.snapshot->backends[0];
    CHECK(b.url == c.url);  // as written
    CHECK(b.base_path == c.base_path);
  }
}

}  // namespace
}  // namespace geogate::config
