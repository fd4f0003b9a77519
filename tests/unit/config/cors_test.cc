// A listener's CORS keys: origins as browsers send them, "*" alone, header
// names, the max age; every bad value reported at its line and column, and
// a hostile value quoted, not echoed.
#include <string>

#include <catch2/catch.hpp>

#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

using testing::Load;

// One listener whose line 2 is `line`.
LoadResult LoadListener(const std::string& line) {
  return Load("[[gateway.listeners]]\n" + line + "\naddress = \"127.0.0.1:0\"\n");
}

TEST_CASE("CORS is off on a listener unless origins are listed", "[config][cors]") {
  LoadResult r = LoadListener("proxy_protocol = false");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  const Cors& c = r.snapshot->gateway.listeners[0].cors;
  CHECK_FALSE(c.enabled());
  CHECK(c.max_age_s == 600);
}

TEST_CASE("listed origins, headers and max age are read", "[config][cors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
cors_allowed_origins = ["https://app.example.com", "http://localhost:5173", "https://[::1]:8443"]
cors_allowed_headers = ["Authorization", "Content-Type", "X-Custom"]
cors_max_age_s = 7200
[[gateway.listeners]]
address = "127.0.0.1:0"
cors_allowed_origins = ["*"]
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  const Cors& c = r.snapshot->gateway.listeners[0].cors;
  CHECK(c.enabled());
  CHECK_FALSE(c.any_origin);
  CHECK(c.allowed_origins == std::vector<std::string>{"https://app.example.com",
                                                      "http://localhost:5173",
                                                      "https://[::1]:8443"});
  CHECK(c.allowed_headers == "authorization, content-type, x-custom");
  CHECK(c.max_age_s == 7200);
  const Cors& any = r.snapshot->gateway.listeners[1].cors;
  CHECK(any.any_origin);
  CHECK(any.allowed_origins.empty());
  // The default headers: what the OpenAI SDK sends from a browser.
  for (const char* h : {"authorization", "content-type", "x-stainless-retry-count",
                        "x-stainless-timeout", "x-stainless-os", "openai-organization"})
    CHECK(any.allowed_headers.find(h) != std::string::npos);
}

TEST_CASE("an origin not spelled as browsers send it is refused with the spelling",
          "[config][cors]") {
  struct Case {
    const char* origin;
    const char* want;
  };
  for (Case c : {
           Case{"https://App.Example.com", "write 'https://app.example.com'"},
           Case{"HTTPS://app.example.com", "write 'https://app.example.com'"},
           Case{"https://app.example.com:443", "write 'https://app.example.com'"},
           Case{"http://app.example.com:80", "write 'http://app.example.com'"},
           Case{"https://app.example.com/", "origin alone: 'https://app.example.com'"},
           Case{"https://app.example.com/chat", "origin alone: 'https://app.example.com'"},
           Case{"https://app.example.com?x=1", "origin alone"},
           Case{"app.example.com", "is not an origin"},
           Case{"*.example.com", "is not an origin"},
           Case{"ftp://files.example.com", "not an http or https origin"},
           Case{"https://user@app.example.com", "has a user name"},
           Case{"https://app.example.com:99999", "no valid port"},
           Case{"https://app.example.com:0", "no valid port"},
           Case{"null", "sandboxed frames"},
           Case{"", "is not an origin"},
       }) {
    LoadResult r = LoadListener(std::string("cors_allowed_origins = [\"") + c.origin + "\"]");
    INFO(c.origin);
    REQUIRE_ONLY_ERROR(r, 2, 25, c.want);
  }
}

TEST_CASE("'*' must stand alone, an origin once, a header name be a token", "[config][cors]") {
  LoadResult star = LoadListener(R"(cors_allowed_origins = ["https://a.example", "*"])");
  REQUIRE_ONLY_ERROR(star, 2, 46, "'*' allows every origin, list it alone");

  LoadResult twice =
      LoadListener(R"(cors_allowed_origins = ["https://a.example", "https://a.example"])");
  REQUIRE_ONLY_ERROR(twice, 2, 46, "is listed twice");

  LoadResult header = LoadListener(R"(cors_allowed_headers = ["x-ok", "bad header"])");
  REQUIRE_ONLY_ERROR(header, 2, 33, "is not a header name");

  LoadResult age = LoadListener("cors_max_age_s = 86401");
  REQUIRE_ONLY_ERROR(age, 2, 18, "cors_max_age_s");

  LoadResult type = LoadListener(R"(cors_allowed_origins = "https://a.example")");
  REQUIRE_ONLY_ERROR(type, 2, 24, "must be an array of strings");
}

TEST_CASE("a hostile origin is quoted escaped and cut, never echoed raw", "[config][cors]") {
  std::string hostile = "\\u001b[31mhttps://x\\u0007" + std::string(300, 'a');
  LoadResult r = LoadListener("cors_allowed_origins = [\"" + hostile + "\"]");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.errors.size() == 1);
  const std::string& m = r.errors[0].message;
  CHECK(m.find('\x1b') == std::string::npos);
  CHECK(m.find('\x07') == std::string::npos);
  CHECK(m.find("\\x1b[31m") != std::string::npos);
  CHECK(m.find("...'") != std::string::npos);
  CHECK(m.size() < 500);  // 80 characters, each at most 4 escaped
}

}  // namespace
}  // namespace geogate::config
