// Files named by the config: resolved against the config file's directory,
// checked to exist and be readable. Also LoadFile itself and the examples/.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

using testing::FakeEnv;
using testing::HasError;
using testing::TempDir;

namespace fs = std::filesystem;

constexpr const char* kWithFiles = R"(
[gateway]
access_log = "logs/access.log"
[[gateway.listeners]]
address = "127.0.0.1:0"
tls = { cert = "certs/edge.pem", key = "../keys/edge.key" }
[geo]
database = "geo/GeoLite2-City.mmdb"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "b"
region = "r"
url = "https://h"
models = ["m"]
ca_file = "certs/ca.pem"
)";

TEST_CASE("relative paths resolve against the config file's directory", "[config][files]") {
  TempDir dir;
  dir.Write("etc/certs/edge.pem");
  dir.Write("keys/edge.key");
  dir.Write("etc/geo/GeoLite2-City.mmdb");
  dir.Write("etc/certs/ca.pem");
  fs::create_directories(dir.path() / "etc/logs");
  std::string config = dir.Write("etc/geogate.toml", testing::Toml(kWithFiles));

  LoadResult r = LoadFile(config, FakeEnv());
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  const Snapshot& s = *r.snapshot;
  fs::path etc = dir.path() / "etc";
  CHECK(s.gateway.listeners[0].tls->cert == (etc / "certs/edge.pem").string());
  CHECK(s.gateway.listeners[0].tls->key == (dir.path() / "keys/edge.key").string());
  CHECK(s.geo.database == (etc / "geo/GeoLite2-City.mmdb").string());
  CHECK(s.backends[0].ca_file == (etc / "certs/ca.pem").string());
  CHECK(s.gateway.access_log == (etc / "logs/access.log").string());
  CHECK(s.source_path == config);
}

TEST_CASE("relative paths resolve from a relative config path too", "[config][files]") {
  TempDir dir;
  dir.Write("conf/certs/edge.pem");
  dir.Write("keys/edge.key");
  dir.Write("conf/geo/GeoLite2-City.mmdb");
  dir.Write("conf/certs/ca.pem");
  fs::create_directories(dir.path() / "conf/logs");
  dir.Write("conf/geogate.toml", testing::Toml(kWithFiles));

  fs::path old = fs::current_path();
  fs::current_path(dir.path());
  LoadResult r = LoadFile("conf/geogate.toml", FakeEnv());
  fs::current_path(old);
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->source_path == (dir.path() / "conf/geogate.toml").string());
  CHECK(r.snapshot->geo.database == (dir.path() / "conf/geo/GeoLite2-City.mmdb").string());
}

TEST_CASE("absolute paths are used as written", "[config][files]") {
  TempDir files;
  TempDir conf;
  std::string cert = files.Write("edge.pem");
  std::string key = files.Write("edge.key");
  std::string text = "[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\ntls = { cert = \"" + cert +
                     "\", key = \"" + key + "\" }\n";
  LoadResult r = LoadString(text, "x.toml", conf.str(), FakeEnv());
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->gateway.listeners[0].tls->cert == cert);
}

TEST_CASE("missing files are errors at the value, with the resolved path", "[config][files]") {
  TempDir dir;
  LoadResult r = testing::Load(kWithFiles, FakeEnv(), dir.str());
  INFO(testing::Describe(r));
  std::string base = dir.str();
  CHECK(HasError(r, 2, 14, "directory '" + base + "/logs' of access_log does not exist"));
  CHECK(HasError(r, 5, 16, "TLS certificate file '" + base + "/certs/edge.pem' does not exist"));
  CHECK(HasError(r, 5, 40,
                 "TLS key file '" + dir.path().parent_path().string() +
                     "/keys/edge.key' does "
                     "not exist"));
  CHECK(HasError(r, 7, 12, "geo database '" + base + "/geo/GeoLite2-City.mmdb' does not exist"));
  CHECK(HasError(r, 17, 11, "CA file '" + base + "/certs/ca.pem' does not exist"));
  CHECK(r.errors.size() == 5);
}

TEST_CASE("a directory is not a file", "[config][files]") {
  TempDir dir;
  fs::create_directories(dir.path() / "certs/edge.pem");
  dir.Write("edge.key");
  fs::create_directories(dir.path() / "logs/access.log");
  LoadResult r = testing::Load(R"(
[gateway]
access_log = "logs/access.log"
[[gateway.listeners]]
address = "127.0.0.1:0"
tls = { cert = "certs/edge.pem", key = "edge.key" }
)",
                               FakeEnv(), dir.str());
  INFO(testing::Describe(r));
  CHECK(HasError(r, 2, 14, "access_log '" + dir.str() + "/logs/access.log' is a directory"));
  CHECK(HasError(r, 5, 16, "is not a regular file"));
  CHECK(r.errors.size() == 2);
}

TEST_CASE("an unreadable file is an error", "[config][files]") {
  // /proc/sys/vm/drop_caches is a regular file that nobody may read, root
  // included (mode 0200, and procfs refuses reads whatever the
  // capabilities): the check is exercised however CI runs.
  const char* kWriteOnly = "/proc/sys/vm/drop_caches";
  struct stat st {};
  REQUIRE(::stat(kWriteOnly, &st) == 0);
  REQUIRE(S_ISREG(st.st_mode));
  REQUIRE(::access(kWriteOnly, R_OK) != 0);
  TempDir dir;
  LoadResult r = testing::Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
database = "/proc/sys/vm/drop_caches"
)",
                               FakeEnv(), dir.str());
  REQUIRE_ONLY_ERROR(r, 4, 12, "geo database '/proc/sys/vm/drop_caches' is not readable");

  // A file with mode 0 is unreadable to everyone but root, who reads it
  // anyway (CAP_DAC_OVERRIDE): the check asks the kernel, so start-up
  // accepts it exactly when it could open it.
  std::string db = dir.Write("geo.mmdb");
  REQUIRE(::chmod(db.c_str(), 0) == 0);
  LoadResult mode0 = testing::Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
database = "geo.mmdb"
)",
                                   FakeEnv(), dir.str());
  if (::geteuid() == 0) {
    INFO(testing::Describe(mode0));
    for (const auto& e : mode0.errors)
      CHECK_THAT(e.message, !Catch::Matchers::Contains("not readable"));
  } else {
    REQUIRE_ONLY_ERROR(mode0, 4, 12, "is not readable");
  }
}

TEST_CASE("a listener with tls needs both cert and key", "[config][files]") {
  TempDir dir;
  dir.Write("edge.pem");
  LoadResult r = testing::Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
tls = { cert = "edge.pem" }
[[gateway.listeners]]
address = "127.0.0.1:1"
tls = { key = "edge.pem" }
[[gateway.listeners]]
address = "127.0.0.1:2"
tls = { cert = "", key = "edge.pem" }
)",
                               FakeEnv(), dir.str());
  INFO(testing::Describe(r));
  CHECK(HasError(r, 3, 7, "missing required key 'key' in [gateway.listeners.tls]"));
  CHECK(HasError(r, 6, 7, "missing required key 'cert' in [gateway.listeners.tls]"));
  CHECK(HasError(r, 9, 16, "TLS certificate file path is empty"));
  CHECK(r.errors.size() == 3);
}

TEST_CASE("LoadFile: an unreadable or missing config file", "[config][files]") {
  TempDir dir;
  LoadResult missing = LoadFile((dir.path() / "nope.toml").string(), FakeEnv());
  REQUIRE(missing.errors.size() == 1);
  CHECK(missing.errors[0].line == 0);
  CHECK(missing.errors[0].ToString() == (dir.path() / "nope.toml").string() +
                                            ": cannot read config file: No such file or directory");

  LoadResult directory = LoadFile(dir.str(), FakeEnv());
  REQUIRE(directory.errors.size() == 1);
  CHECK(directory.errors[0].ToString() == dir.str() + ": cannot read config file: Is a directory");
}

TEST_CASE("LoadFile: errors name the file as given", "[config][files]") {
  TempDir dir;
  std::string path = dir.Write("g.toml", "[health]\nintervall_ms = 1\n");
  LoadResult r = LoadFile(path, FakeEnv());
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].ToString() ==
        path + ": no [[gateway.listeners]]: at least one listener is required");
  CHECK(r.errors[1].ToString() ==
        path + ":2:1: unknown key 'intervall_ms' in [health] (did you mean 'interval_ms'?)");
}

TEST_CASE("LoadFile: the hash covers the file's exact bytes", "[config][files]") {
  TempDir dir;
  std::string path = dir.Write("g.toml", "[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\n");
  LoadResult r = LoadFile(path, FakeEnv());
  REQUIRE(r.ok());
  CHECK(r.snapshot->hash == "b9eba90b4b60213477a3d27bb6fd1906acae6a7e9a429b41ef8d67b293c5b06e");
}

// ----------------------------------------------------------------- examples --

TEST_CASE("examples/single-region.toml loads as shipped", "[config][examples]") {
  LoadResult r = LoadFile(GEOGATE_SOURCE_DIR "/examples/single-region.toml", FakeEnv());
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.warnings.empty());
  const Snapshot& s = *r.snapshot;
  CHECK(s.regions.size() == 1);
  CHECK(s.backends.size() == 2);
  REQUIRE(s.models.size() == 1);
  CHECK(s.backends_by_model[0] == std::vector<size_t>{0, 1});
  CHECK(s.backends[1].models == std::vector<std::string>{"llama-3.1-8b"});
  REQUIRE(s.geo.unknown_rule);
  CHECK(s.residency[*s.geo.unknown_rule].allowed.contains(0));
  CHECK(s.geo.database.empty());
}

TEST_CASE("examples/multi-region.toml loads with its files and keys", "[config][examples]") {
  TempDir dir;
  fs::copy_file(GEOGATE_SOURCE_DIR "/examples/multi-region.toml", dir.path() / "geogate.toml");
  dir.Write("certs/edge.pem");
  dir.Write("certs/edge.key");
  dir.Write("GeoLite2-City.mmdb");
  LoadResult r = LoadFile((dir.path() / "geogate.toml").string(),
                          FakeEnv({{"EU_WEST_KEY", "k1"}, {"US_EAST_KEY", "k2"}}));
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.warnings.empty());
  const Snapshot& s = *r.snapshot;
  CHECK(s.regions.size() == 3);
  CHECK(s.backends.size() == 3);
  CHECK(s.models.size() == 2);
  CHECK(s.tenants.size() == 1);
  CHECK(s.backends[0].api_key == "k1");
  CHECK(s.backends[2].api_key == "k2");

  // Without the environment it is refused, naming both variables.
  LoadResult no_env = LoadFile((dir.path() / "geogate.toml").string(), FakeEnv());
  INFO(testing::Describe(no_env));
  CHECK(no_env.errors.size() == 2);
}

}  // namespace
}  // namespace geogate::config
