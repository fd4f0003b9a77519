// RunCheck: what `geogate --check --config FILE` prints and returns.
#include <sstream>

#include <catch2/catch.hpp>

#include "config/check.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

using testing::FakeEnv;
using testing::TempDir;

TEST_CASE("a valid file: summary on stdout, exit 0", "[config][check]") {
  TempDir dir;
  std::string path = dir.Write("geogate.toml", testing::Toml(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "b"
region = "r"
url = "http://h"
models = ["m1", "m2"]
[[residency]]
name = "eu"
allow_regions = ["r"]
[[tenants]]
name = "t"
api_key_sha256 = ["2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"]
)"));
  std::ostringstream out, err;
  int code = RunCheck(path, out, err, FakeEnv());
  INFO(err.str());
  CHECK(code == 0);
  CHECK(err.str().empty());
  LoadResult r = LoadFile(path, FakeEnv());
  REQUIRE(r.ok());
  CHECK(out.str() == path +
                         ": ok (1 regions, 1 backends, 2 models, 1 residency rules, 1 tenants, "
                         "hash " +
                         r.snapshot->hash.substr(0, 8) + "...)\n");
}

TEST_CASE("warnings go to stderr and do not fail the check", "[config][check]") {
  TempDir dir;
  std::string path = dir.Write("g.toml", "[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\n");
  std::ostringstream out, err;
  CHECK(RunCheck(path, out, err, FakeEnv()) == 0);
  CHECK(err.str() == path + ": warning: no [[backends]]: every model request will fail with 404\n");
  CHECK_THAT(out.str(), Catch::Matchers::StartsWith(path + ": ok (0 regions, 0 backends"));
}

TEST_CASE("errors: every one on stderr as file:line:col, exit 1, nothing on stdout",
          "[config][check]") {
  TempDir dir;
  std::string path = dir.Write("bad.toml", testing::Toml(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[health]
intervall_ms = 100
timeout_ms = 0
[[backends]]
name = "b"
region = "nowhere"
url = "http://h"
models = ["m"]
api_key_env = "GEOGATE_CHECK_TEST_UNSET_VAR"
)"));
  std::ostringstream out, err;
  CHECK(RunCheck(path, out, err, FakeEnv()) == 1);
  CHECK(out.str().empty());
  std::string expected =
      path + ":4:1: unknown key 'intervall_ms' in [health] (did you mean 'interval_ms'?)\n" + path +
      ":5:14: 'timeout_ms' in [health] must be greater than 0, got 0\n" + path +
      ":8:10: backend 'b': region 'nowhere' is not declared in [[regions]]\n" + path +
      ":11:15: environment variable 'GEOGATE_CHECK_TEST_UNSET_VAR' (api_key_env of backend 'b') "
      "is not set\n";
  CHECK(err.str() == expected);
}

TEST_CASE("a syntax error fails the check with its position", "[config][check]") {
  TempDir dir;
  std::string path = dir.Write("bad.toml", "[gateway\n");
  std::ostringstream out, err;
  CHECK(RunCheck(path, out, err, FakeEnv()) == 1);
  CHECK_THAT(err.str(), Catch::Matchers::StartsWith(path + ":1:"));
  CHECK_THAT(err.str(), Catch::Matchers::Contains("TOML syntax error"));
}

TEST_CASE("a missing file fails the check", "[config][check]") {
  std::ostringstream out, err;
  CHECK(RunCheck("/nonexistent/geogate.toml", out, err, FakeEnv()) == 1);
  CHECK(err.str() ==
        "/nonexistent/geogate.toml: cannot read config file: No such file or directory\n");
  CHECK(out.str().empty());
}

TEST_CASE("RunCheck reads the process environment by default", "[config][check]") {
  TempDir dir;
  std::string path = dir.Write("g.toml", testing::Toml(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "b"
region = "r"
url = "http://h"
models = ["m"]
api_key_env = "GEOGATE_CHECK_TEST_KEY"
)"));
  ::setenv("GEOGATE_CHECK_TEST_KEY", "secret-value", 1);
  std::ostringstream out, err;
  CHECK(RunCheck(path, out, err) == 0);
  ::unsetenv("GEOGATE_CHECK_TEST_KEY");
  std::ostringstream out2, err2;
  CHECK(RunCheck(path, out2, err2) == 1);
  CHECK(err2.str().find("secret-value") == std::string::npos);
  CHECK(out.str().find("secret-value") == std::string::npos);
}

TEST_CASE("the shipped example passes --check", "[config][check][examples]") {
  std::ostringstream out, err;
  CHECK(RunCheck(GEOGATE_SOURCE_DIR "/examples/single-region.toml", out, err, FakeEnv()) == 0);
  CHECK(err.str().empty());
  CHECK_THAT(out.str(), Catch::Matchers::Contains(
                            ": ok (1 regions, 2 backends, 1 models, 1 residency rules, 0 tenants"));
}

TEST_CASE("syntax only (--syntax-only): named files and secrets are not needed, values still are",
          "[config][check]") {
  TempDir dir;
  std::string text(testing::Toml(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
tls = { cert = "certs/missing.pem", key = "certs/missing.key" }
[gateway]
access_log = "no-such-dir/access.log"
[geo]
database = "missing.mmdb"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "b"
region = "r"
url = "https://h"
models = ["m"]
api_key_env = "GEOGATE_CHECK_TEST_UNSET_VAR"
ca_file = "missing-ca.pem"
)"));
  std::string path = dir.Write("g.toml", text);
  CheckOptions full;
  full.env = FakeEnv();
  bool opened = false;
  full.open_files = [&](const Snapshot&, const std::string&) {
    opened = true;
    return std::vector<ConfigError>{};
  };
  std::ostringstream out, err;
  CHECK(RunCheck(path, out, err, full) == 1);
  for (const char* what : {"missing.pem", "missing.key", "no-such-dir", "missing.mmdb",
                           "GEOGATE_CHECK_TEST_UNSET_VAR", "missing-ca.pem"})
    CHECK_THAT(err.str(), Catch::Matchers::Contains(what));
  CHECK_FALSE(opened);  // the load failed: nothing to open

  CheckOptions lint = full;
  lint.syntax_only = true;
  std::ostringstream out2, err2;
  CHECK(RunCheck(path, out2, err2, lint) == 0);
  INFO(err2.str());
  CHECK_THAT(out2.str(), Catch::Matchers::Contains(": ok (1 regions, 1 backends"));
  CHECK_THAT(out2.str(), Catch::Matchers::EndsWith(
                             "; syntax only: named files and environment variables not checked\n"));
  CHECK_FALSE(opened);  // --syntax-only opens nothing

  std::string bad = dir.Write("bad.toml", text + "[health]\ninterval_ms = 0\n");
  std::ostringstream out3, err3;
  CHECK(RunCheck(bad, out3, err3, lint) == 1);
  CHECK(err3.str() == bad + ":20:15: 'interval_ms' in [health] must be greater than 0, got 0\n");
}

TEST_CASE("the file opener's errors fail the check after a clean load", "[config][check]") {
  TempDir dir;
  std::string path = dir.Write("g.toml", "[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\n");
  CheckOptions options;
  options.env = FakeEnv();
  options.open_files = [](const Snapshot& s, const std::string& file) {
    CHECK(s.gateway.listeners.size() == 1);
    return std::vector<ConfigError>{ConfigError{file, 2, 11, "cannot use it"}};
  };
  std::ostringstream out, err;
  CHECK(RunCheck(path, out, err, options) == 1);
  CHECK(out.str().empty());
  CHECK_THAT(err.str(), Catch::Matchers::StartsWith(path + ":2:11: cannot use it\n"));
}

}  // namespace
}  // namespace geogate::config
