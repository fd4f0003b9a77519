// Every validation error, with the exact line and column it is reported at.
// The TOML is inline; testing::Toml drops the newline after R"( so the first
// line written is line 1.
#include <catch2/catch.hpp>

#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

using testing::FakeEnv;
using testing::HasError;
using testing::Load;

// ---------------------------------------------------------------- syntax --

TEST_CASE("a TOML syntax error is reported at toml++'s position", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[health]
interval_ms =
)");
  REQUIRE_ONLY_ERROR(r, 4, 14, "TOML syntax error");
  CHECK(r.errors[0].ToString().rfind("test.toml:4:14: TOML syntax error: ", 0) == 0);
}

TEST_CASE("a key defined twice is a syntax error at the second", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
address = "127.0.0.1:1"
)");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].line == 3);
  CHECK_THAT(r.errors[0].message, Catch::Matchers::Contains("address"));
}

TEST_CASE("an unclosed string is a syntax error", "[config][errors]") {
  LoadResult r = Load(R"(
[gateway]
edge = "fra1
)");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].line == 2);
}

// ------------------------------------------------------------- structure --

TEST_CASE("no listeners at all is an error about the whole file", "[config][errors]") {
  LoadResult r = Load(R"(
[health]
interval_ms = 100
)");
  REQUIRE_ONLY_ERROR(r, 0, 0, "at least one listener is required");
  CHECK(r.errors[0].ToString() ==
        "test.toml: no [[gateway.listeners]]: at least one listener is required");
}

TEST_CASE("[gateway] without listeners points at [gateway]", "[config][errors]") {
  LoadResult r = Load(R"(
[routing]
tie_ms = 1

[gateway]
edge = "fra1"
)");
  REQUIRE_ONLY_ERROR(r, 4, 1, "at least one listener is required");
}

TEST_CASE("an empty listeners array is an error", "[config][errors]") {
  LoadResult r = Load(R"(
[gateway]
listeners = []
)");
  REQUIRE_ONLY_ERROR(r, 1, 1, "at least one listener is required");
}

TEST_CASE("a missing required key points at its table's header", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"

[[gateway.listeners]]
proxy_protocol = true
)");
  REQUIRE_ONLY_ERROR(r, 4, 1, "missing required key 'address' in [[gateway.listeners]]");
}

TEST_CASE("missing required keys of regions, backends, rules, tenants, models",
          "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"

[[regions]]
name = "r1"

[[backends]]
name = "b1"

[[residency]]
allow_regions = []

[[tenants]]
name = "t"

[[models]]
aliases = ["x"]
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 1, "missing required key 'jurisdiction' in [[regions]]"));
  CHECK(HasError(r, 4, 1, "missing required key 'location' in [[regions]]"));
  CHECK(HasError(r, 7, 1, "missing required key 'region' in [[backends]]"));
  CHECK(HasError(r, 7, 1, "missing required key 'url' in [[backends]]"));
  CHECK(HasError(r, 7, 1, "missing required key 'models' in [[backends]]"));
  CHECK(HasError(r, 10, 1, "missing required key 'name' in [[residency]]"));
  CHECK(HasError(r, 13, 1, "missing required key 'api_key_sha256' in [[tenants]]"));
  CHECK(HasError(r, 16, 1, "missing required key 'name' in [[models]]"));
}

TEST_CASE("a missing key of an inline table points at the inline table", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
tls = { cert = "edge.pem" }
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1 }
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 3, 7, "missing required key 'key' in [gateway.listeners.tls]"));
  CHECK(HasError(r, 7, 12, "missing required key 'lon' in [regions.location]"));
}

TEST_CASE("unsupported version", "[config][errors]") {
  LoadResult r = Load(R"(
version = 2
[[gateway.listeners]]
address = "127.0.0.1:0"
)");
  REQUIRE_ONLY_ERROR(r, 1, 11, "unsupported config version 2");
}

// ---------------------------------------------------------- unknown keys --

TEST_CASE("an unknown key is reported at the key with a suggestion", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"

[health]
intervall_ms = 100
)");
  REQUIRE_ONLY_ERROR(r, 5, 1,
                     "unknown key 'intervall_ms' in [health] (did you mean 'interval_ms'?)");
}

TEST_CASE("unknown keys everywhere, with and without a suggestion", "[config][errors]") {
  LoadResult r = Load(R"(
gatway = 1
[[gateway.listeners]]
address = "127.0.0.1:0"
tls = { cert = "a", kye = "b" }

[[backends]]
name = "b"
capcity = 3
frobnicate = true

[geo.extra]
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 1, 1, "unknown key 'gatway' at the top level (did you mean 'gateway'?)"));
  CHECK(HasError(r, 4, 21, "unknown key 'kye' in [gateway.listeners.tls] (did you mean 'key'?)"));
  CHECK(HasError(r, 8, 1, "unknown key 'capcity' in [[backends]] (did you mean 'capacity'?)"));
  CHECK(HasError(r, 9, 1, "unknown key 'frobnicate' in [[backends]]"));
  for (const auto& e : r.errors) {
    if (e.line == 9) CHECK(e.message.find("did you mean") == std::string::npos);
  }
  CHECK(HasError(r, 11, 6, "unknown key 'extra' in [geo]"));
}

TEST_CASE("unknown keys in every section are caught", "[config][errors]") {
  LoadResult r = Load(R"(
[gateway]
edge_name = "x"
[[gateway.listeners]]
address = "127.0.0.1:0"
tls_on = true
[gateway.admin]
adress = "127.0.0.1:1"
[gateway.limits]
max_headers = 1
[gateway.upstream]
connect_timeout = 1
[geo]
databse = "x"
[health]
pth = "/"
[routing]
slack = 1
[[regions]]
nme = "r"
[[models]]
alias = ["a"]
[[residency]]
country = ["DE"]
[[tenants]]
rps = 1
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 2, 1, "unknown key 'edge_name' in [gateway]"));
  CHECK(HasError(r, 5, 1, "unknown key 'tls_on' in [[gateway.listeners]]"));
  CHECK(HasError(r, 7, 1, "unknown key 'adress' in [gateway.admin] (did you mean 'address'?)"));
  CHECK(HasError(r, 9, 1, "unknown key 'max_headers' in [gateway.limits]"));
  CHECK(HasError(r, 11, 1,
                 "unknown key 'connect_timeout' in [gateway.upstream] (did you mean "
                 "'connect_timeout_ms'?)"));
  CHECK(HasError(r, 13, 1, "unknown key 'databse' in [geo] (did you mean 'database'?)"));
  CHECK(HasError(r, 15, 1, "unknown key 'pth' in [health] (did you mean 'path'?)"));
  CHECK(HasError(r, 17, 1, "unknown key 'slack' in [routing]"));
  CHECK(HasError(r, 19, 1, "unknown key 'nme' in [[regions]] (did you mean 'name'?)"));
  CHECK(HasError(r, 21, 1, "unknown key 'alias' in [[models]] (did you mean 'aliases'?)"));
  CHECK(HasError(r, 23, 1, "unknown key 'country' in [[residency]] (did you mean 'countries'?)"));
  CHECK(HasError(r, 25, 1, "unknown key 'rps' in [[tenants]]"));
}

// ------------------------------------------------------------------ types --

TEST_CASE("type errors name the expected type and sit on the value", "[config][errors]") {
  LoadResult r = Load(R"(
[gateway]
workers = "4"
residency_header = 1
[[gateway.listeners]]
address = 8080
proxy_protocol = "yes"
[health]
interval_ms = 100.0
[routing]
ewma_alpha = "0.3"
[geo]
trusted_proxies = "10.0.0.0/8"
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 2, 11, "'workers' in [gateway] must be an integer, got a string"));
  CHECK(HasError(r, 3, 20,
                 "'residency_header' in [gateway] must be a boolean (true or false), got an "
                 "integer"));
  CHECK(HasError(r, 5, 11, "'address' in [[gateway.listeners]] must be a string, got an integer"));
  CHECK(HasError(r, 6, 18, "'proxy_protocol' in [[gateway.listeners]] must be a boolean"));
  CHECK(HasError(r, 8, 15, "'interval_ms' in [health] must be an integer, got a float"));
  CHECK(HasError(r, 10, 14, "'ewma_alpha' in [routing] must be a number, got a string"));
  CHECK(
      HasError(r, 12, 19, "'trusted_proxies' in [geo] must be an array of strings, got a string"));
  CHECK(r.errors.size() == 7);
}

TEST_CASE("array elements of the wrong type are reported one by one", "[config][errors]") {
  LoadResult r = Load(R"(
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
models = ["a", 2, "c", true]
)");
  INFO(testing::Describe(r));
  CHECK(
      HasError(r, 11, 16, "elements of 'models' in [[backends]] must be strings, got an integer"));
  CHECK(HasError(r, 11, 24, "elements of 'models' in [[backends]] must be strings, got a boolean"));
  CHECK(r.errors.size() == 2);
}

TEST_CASE("a section of the wrong shape", "[config][errors]") {
  LoadResult r = Load(R"(
health = 5
[[gateway.listeners]]
address = "127.0.0.1:0"
[regions]
name = "r"
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 1, 10, "'health' must be a table, got an integer"));
  CHECK(HasError(r, 4, 1, "'regions' must be an array of tables ([[regions]]), got a table"));
  CHECK(r.errors.size() == 2);
}

// ----------------------------------------------------------------- ranges --

TEST_CASE("range checks", "[config][errors]") {
  LoadResult r = Load(R"(
[gateway]
workers = 1025
[[gateway.listeners]]
address = "127.0.0.1:0"
[gateway.limits]
max_header_bytes = 0
max_body_bytes = -1
header_timeout_ms = 0
max_connections = -5
[gateway.upstream]
connect_timeout_ms = 0
max_attempts = 11
retry_budget_percent = 101
drain_delay_ms = -1
[health]
unhealthy_threshold = 0
healthy_threshold = 0
jitter_percent = 200
max_ejection_percent = -1
outlier_consecutive_failures = 0
[routing]
ewma_alpha = 0
tie_ms = -2
sample_stale_ms = 0
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 2, 11, "'workers' in [gateway] must be between 0 and 1024, got 1025"));
  CHECK(HasError(r, 6, 20, "'max_header_bytes' in [gateway.limits] must be greater than 0, got 0"));
  CHECK(HasError(r, 7, 18, "'max_body_bytes' in [gateway.limits] must be greater than 0, got -1"));
  CHECK(HasError(r, 8, 21, "'header_timeout_ms' in [gateway.limits] must be greater than 0"));
  CHECK(HasError(r, 9, 19, "'max_connections' in [gateway.limits] must be at least 0, got -5"));
  CHECK(HasError(r, 11, 22, "'connect_timeout_ms' in [gateway.upstream] must be greater than 0"));
  CHECK(
      HasError(r, 12, 16, "'max_attempts' in [gateway.upstream] must be between 1 and 10, got 11"));
  CHECK(
      HasError(r, 13, 24,
               "'retry_budget_percent' in [gateway.upstream] must be between 0 and 100, got 101"));
  CHECK(HasError(r, 14, 18, "'drain_delay_ms' in [gateway.upstream] must be at least 0, got -1"));
  CHECK(HasError(r, 16, 23, "'unhealthy_threshold' in [health] must be greater than 0, got 0"));
  CHECK(HasError(r, 17, 21, "'healthy_threshold' in [health] must be greater than 0, got 0"));
  CHECK(HasError(r, 18, 18, "'jitter_percent' in [health] must be between 0 and 100, got 200"));
  CHECK(HasError(r, 19, 24, "'max_ejection_percent' in [health] must be between 0 and 100"));
  CHECK(HasError(r, 20, 32, "'outlier_consecutive_failures' in [health] must be greater than 0"));
  CHECK(
      HasError(r, 22, 14, "'ewma_alpha' in [routing] must be greater than 0 and at most 1, got 0"));
  CHECK(HasError(r, 23, 10, "'tie_ms' in [routing] must be at least 0, got -2"));
  CHECK(HasError(r, 24, 19, "'sample_stale_ms' in [routing] must be greater than 0, got 0"));
  CHECK(r.errors.size() == 17);
}

TEST_CASE("max_attempts at both ends of 1..10 is fine", "[config][errors]") {
  for (int n : {1, 10}) {
    std::string text =
        "[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\n"
        "[gateway.upstream]\nmax_attempts = " +
        std::to_string(n) + "\n";
    LoadResult r = LoadString(text, "t.toml", "/", FakeEnv());
    INFO(testing::Describe(r));
    REQUIRE(r.ok());
    CHECK(r.snapshot->gateway.upstream.max_attempts == static_cast<uint32_t>(n));
  }
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[gateway.upstream]
max_attempts = 0
)");
  REQUIRE_ONLY_ERROR(r, 4, 16, "must be between 1 and 10, got 0");
}

TEST_CASE("ewma_alpha above 1 and huge durations", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[routing]
ewma_alpha = 1.5
latency_slack_ms = 9999999999
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 14, "must be greater than 0 and at most 1, got 1.5"));
  CHECK(HasError(r, 5, 20, "'latency_slack_ms' in [routing] must be at most 2147483647"));
  CHECK(r.errors.size() == 2);
}

TEST_CASE("non-finite floats are refused", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[routing]
ewma_alpha = nan
)");
  REQUIRE_ONLY_ERROR(r, 4, 14, "'ewma_alpha' in [routing] must be a finite number");
}

TEST_CASE("outlier_max_ejection_ms below the base is an error", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[health]
outlier_base_ejection_ms = 10000
outlier_max_ejection_ms = 5000
)");
  REQUIRE_ONLY_ERROR(r, 5, 27, "outlier_max_ejection_ms (5000) in [health] is less than");
}

TEST_CASE("health path and load_report must be HTTP paths", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[health]
path = "health"
load_report = "on"
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 8, "'path' in [health] must be an HTTP path starting with '/'"));
  CHECK(HasError(r, 5, 15, "'load_report' in [health] must be \"auto\", \"off\" or an HTTP path"));
  CHECK(r.errors.size() == 2);
}

TEST_CASE("backend numeric ranges", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 91, lon = -181 }
[[backends]]
name = "b"
region = "r"
url = "http://h"
models = ["m"]
capacity = 0
cost_per_hour = -0.5
weight = 0
vram_gb = 0
[[models]]
name = "m"
min_vram_gb = -1
[[tenants]]
name = "t"
api_key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000000"]
requests_per_second = -1
burst = -1
max_concurrent = -1
monthly_budget = -10
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 6, 20, "'lat' in [regions.location] must be between -90 and 90, got 91"));
  CHECK(HasError(r, 6, 30, "'lon' in [regions.location] must be between -180 and 180, got -181"));
  CHECK(HasError(r, 12, 12, "'capacity' in [[backends]] must be greater than 0, got 0"));
  CHECK(HasError(r, 13, 17, "'cost_per_hour' in [[backends]] must be at least 0, got -0.5"));
  CHECK(HasError(r, 14, 10, "'weight' in [[backends]] must be greater than 0, got 0"));
  CHECK(HasError(r, 15, 11, "'vram_gb' in [[backends]] must be greater than 0, got 0"));
  CHECK(HasError(r, 18, 15, "'min_vram_gb' in [[models]] must be greater than 0, got -1"));
  CHECK(HasError(r, 22, 23, "'requests_per_second' in [[tenants]] must be at least 0"));
  CHECK(HasError(r, 23, 9, "'burst' in [[tenants]] must be at least 0"));
  CHECK(HasError(r, 24, 18, "'max_concurrent' in [[tenants]] must be at least 0"));
  CHECK(HasError(r, 25, 18, "'monthly_budget' in [[tenants]] must be at least 0"));
  CHECK(r.errors.size() == 11);
}

// ------------------------------------------------------------------ enums --

TEST_CASE("enum values", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
client_ip = "xff"
unknown = "allow"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "b"
region = "r"
url = "http://h"
models = ["m"]
tier = "preemptible"
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 13,
                 "'client_ip' in [geo] must be one of \"peer\", \"x-forwarded-for\", "
                 "\"proxy-protocol\", got \"xff\""));
  CHECK(HasError(r, 5, 11,
                 "'unknown' in [geo] must be \"deny\" or the name of a [[residency]] rule, got "
                 "\"allow\""));
  CHECK(HasError(r, 15, 8,
                 "'tier' in [[backends]] must be one of \"reserved\", \"on-demand\", \"spot\", "
                 "got \"preemptible\""));
  CHECK(r.errors.size() == 3);
}

TEST_CASE("every client_ip and tier value is accepted", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
proxy_protocol = true
[geo]
client_ip = "proxy-protocol"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "a"
region = "r"
url = "http://h"
models = ["m"]
tier = "reserved"
[[backends]]
name = "b"
region = "r"
url = "http://h"
models = ["m"]
tier = "on-demand"
[[backends]]
name = "c"
region = "r"
url = "http://h"
models = ["m"]
tier = "spot"
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->geo.client_ip == ClientIpSource::kProxyProtocol);
  CHECK(r.snapshot->backends[0].tier == Tier::kReserved);
  CHECK(r.snapshot->backends[1].tier == Tier::kOnDemand);
  CHECK(r.snapshot->backends[2].tier == Tier::kSpot);
  CHECK(r.warnings.empty());

  LoadResult peer = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
client_ip = "peer"
)");
  REQUIRE(peer.ok());
  CHECK(peer.snapshot->geo.client_ip == ClientIpSource::kPeer);
}

TEST_CASE("geo.unknown suggests the closest rule", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
unknown = "europe"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[residency]]
name = "europa"
allow_regions = ["r"]
)");
  REQUIRE_ONLY_ERROR(r, 4, 11, "(did you mean 'europa'?)");
}

TEST_CASE("geo field paths", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
country_field = ""
continent_field = "continent..code"
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 17, "'country_field' in [geo] must be a dotted field path"));
  CHECK(HasError(r, 5, 19, "'continent_field' in [geo] must be a dotted field path"));
  CHECK(r.errors.size() == 2);
}

// -------------------------------------------------------------- addresses --

TEST_CASE("listener and admin addresses", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "localhost:8080"
[[gateway.listeners]]
address = "0.0.0.0"
[[gateway.listeners]]
address = "::1:8080"
[[gateway.listeners]]
address = "0.0.0.0:65536"
[[gateway.listeners]]
address = "[::1]8080"
[gateway.admin]
address = "127.0.0.1:http"
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 2, 11,
                 "'address' in [[gateway.listeners]]: 'localhost' is not a numeric IPv4 address"));
  CHECK(HasError(r, 4, 11, "'0.0.0.0' needs a port"));
  CHECK(HasError(r, 6, 11, "must be in brackets"));
  CHECK(HasError(r, 8, 11, "port '65536' is not a number from 0 to 65535"));
  CHECK(HasError(r, 10, 11, "'[::1]8080' needs a port"));
  CHECK(HasError(r, 12, 11, "'address' in [gateway.admin]: port 'http' is not a number"));
  CHECK(r.errors.size() == 6);
}

TEST_CASE("listener port 0 is allowed (tests pick a port)", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[gateway.listeners]]
address = "127.0.0.1:0"
[gateway.admin]
address = "[::1]:0"
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->gateway.admin.host == "::1");
  CHECK(r.snapshot->gateway.admin.port == 0);
}

TEST_CASE("the same listener address twice, or shared with admin", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "0.0.0.0:8080"
[[gateway.listeners]]
address = "0.0.0.0:08080"
[gateway.admin]
address = "0.0.0.0:8080"
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 11, "listener address '0.0.0.0:08080' repeats the listener at line 2"));
  CHECK(HasError(r, 6, 11, "admin address '0.0.0.0:8080' is also the listener at line 2"));
  CHECK(r.errors.size() == 2);
}

TEST_CASE("backend URLs", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "a"
region = "r"
url = "ftp://h/"
models = ["m"]
[[backends]]
name = "b"
region = "r"
url = "http://h:8000/v1?x=1"
models = ["m"]
[[backends]]
name = "c"
region = "r"
url = "https://user:pw@h/"
models = ["m"]
[[backends]]
name = "d"
region = "r"
url = "http://h:0"
models = ["m"]
[[backends]]
name = "e"
region = "r"
url = "10.0.0.1:8000"
models = ["m"]
[[backends]]
name = "f"
region = "r"
url = "http://h/#frag"
models = ["m"]
[[backends]]
name = "g"
region = "r"
url = "http:///path"
models = ["m"]
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 10, 7, "'url' in [[backends]]: URL scheme 'ftp' is not supported"));
  CHECK(HasError(r, 15, 7, "must not contain a query"));
  CHECK(HasError(r, 20, 7, "must not contain user information"));
  CHECK(HasError(r, 25, 7, "URL port '0' must be a number from 1 to 65535"));
  CHECK(HasError(r, 30, 7, "'10.0.0.1:8000' is not a URL: it needs a scheme, http:// or https://"));
  CHECK(HasError(r, 35, 7, "must not contain a fragment"));
  CHECK(HasError(r, 40, 7, "has no host"));
  CHECK(r.errors.size() == 7);
  // The password is not echoed back.
  for (const auto& e : r.errors)
    CHECK(e.message.find("pw") == std::string::npos);
}

TEST_CASE("trusted_proxies entries", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
trusted_proxies = ["10.0.0.1/8", "10.0.0.0/33", "proxy.internal", "2001:db8::1/129", "fe80::/10"]
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 20, "'10.0.0.1/8' has host bits set (did you mean '10.0.0.0/8'?)"));
  CHECK(HasError(r, 4, 34, "prefix length '33' must be a number from 0 to 32"));
  CHECK(HasError(r, 4, 49, "'proxy.internal' is not an IPv4 address"));
  CHECK(HasError(r, 4, 67, "prefix length '129' must be a number from 0 to 128"));
  CHECK(r.errors.size() == 4);
}

// ------------------------------------------------------------- references --

constexpr const char* kRegionsHeader = R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[regions]]
name = "eu-west"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[regions]]
name = "us-east"
jurisdiction = "US"
location = { lat = 1, lon = 2 }
)";  // 10 lines

LoadResult LoadWithRegions(std::string_view rest, const EnvLookup& env = FakeEnv()) {
  std::string text = std::string(testing::Toml(kRegionsHeader)) + std::string(testing::Toml(rest));
  return LoadString(text, "test.toml", "/", env);
}

TEST_CASE("backend region must be declared", "[config][errors]") {
  LoadResult r = LoadWithRegions(R"(
[[backends]]
name = "b"
region = "eu-wset"
url = "http://h"
models = ["m"]
)");
  REQUIRE_ONLY_ERROR(r, 13, 10,
                     "backend 'b': region 'eu-wset' is not declared in [[regions]] (did you "
                     "mean 'eu-west'?)");
}

TEST_CASE("residency references: regions, jurisdictions, empty rules", "[config][errors]") {
  LoadResult r = LoadWithRegions(R"(
[[backends]]
name = "b"
region = "eu-west"
url = "http://h"
models = ["m"]
[[residency]]
name = "eu"
allow_regions = ["eu-west", "eu-north"]
allow_jurisdictions = ["EU", "UK"]
[[residency]]
name = "nothing"
countries = ["DE"]
)");
  INFO(testing::Describe(r));
  CHECK(
      HasError(r, 18, 29, "residency rule 'eu': region 'eu-north' is not declared in [[regions]]"));
  CHECK(HasError(r, 19, 30, "residency rule 'eu': no region has jurisdiction 'UK'"));
  CHECK(HasError(r, 20, 1, "residency rule 'nothing' allows no region"));
  CHECK(r.errors.size() == 3);
}

TEST_CASE("tenant residency must be a rule", "[config][errors]") {
  LoadResult r = LoadWithRegions(R"(
[[residency]]
name = "eu"
allow_jurisdictions = ["EU"]
[[tenants]]
name = "acme"
api_key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000000"]
residency = "EU"
)");
  REQUIRE_ONLY_ERROR(r, 17, 13,
                     "tenant 'acme': residency rule 'EU' is not declared in [[residency]] (did "
                     "you mean 'eu'?)");
}

TEST_CASE("duplicate names are reported at the second", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "b"
region = "r"
url = "http://h"
models = ["m"]
[[backends]]
name = "b"
region = "r"
url = "http://h2"
models = ["m"]
[[models]]
name = "m"
[[models]]
name = "m"
[[residency]]
name = "x"
allow_regions = ["r"]
[[residency]]
name = "x"
allow_regions = ["r"]
[[tenants]]
name = "t"
api_key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000000"]
[[tenants]]
name = "t"
api_key_sha256 = ["1111111111111111111111111111111111111111111111111111111111111111"]
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 8, 8, "duplicate region name 'r' (first defined at line 4)"));
  CHECK(HasError(r, 17, 8, "duplicate backend name 'b' (first defined at line 12)"));
  CHECK(HasError(r, 24, 8, "duplicate model name 'm' (first defined at line 22)"));
  CHECK(HasError(r, 29, 8, "duplicate residency rule name 'x' (first defined at line 26)"));
  CHECK(HasError(r, 35, 8, "duplicate tenant name 't' (first defined at line 32)"));
  CHECK(r.errors.size() == 5);
}

TEST_CASE("model aliases may not collide", "[config][errors]") {
  LoadResult r = LoadWithRegions(R"(
[[models]]
name = "llama-3.1-8b"
aliases = ["llama-8b", "llama-3.1-8b"]
[[models]]
name = "llama-3.1-70b"
aliases = ["llama-8b", "llama-3.1-8b", "llama-70b"]
[[models]]
name = "llama-70b"
)");
  INFO(testing::Describe(r));
  CHECK(
      HasError(r, 13, 24, "alias 'llama-3.1-8b' of model 'llama-3.1-8b' is the model's own name"));
  CHECK(HasError(r, 16, 12,
                 "alias 'llama-8b' of model 'llama-3.1-70b' collides with an alias of model "
                 "'llama-3.1-8b' (line 13)"));
  CHECK(HasError(r, 16, 24,
                 "alias 'llama-3.1-8b' of model 'llama-3.1-70b' collides with model "
                 "'llama-3.1-8b' (line 12)"));
  CHECK(HasError(r, 16, 40,
                 "alias 'llama-70b' of model 'llama-3.1-70b' collides with model 'llama-70b' "
                 "(line 18)"));
  CHECK(r.errors.size() == 4);
}

TEST_CASE("a backend listing one model twice, directly or by alias", "[config][errors]") {
  LoadResult r = LoadWithRegions(R"(
[[backends]]
name = "b"
region = "eu-west"
url = "http://h"
models = ["llama-3.1-8b", "llama-8b", "x", "x"]
[[models]]
name = "llama-3.1-8b"
aliases = ["llama-8b"]
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 15, 27,
                 "backend 'b' lists model 'llama-3.1-8b' twice ('llama-8b' is an alias of it)"));
  CHECK(HasError(r, 15, 44, "backend 'b' lists model 'x' twice"));
  CHECK(r.errors.size() == 2);
}

TEST_CASE("a backend must serve at least one model", "[config][errors]") {
  LoadResult r = LoadWithRegions(R"(
[[backends]]
name = "b"
region = "eu-west"
url = "http://h"
models = []
)");
  REQUIRE_ONLY_ERROR(r, 15, 10, "'models' in [[backends]] must list at least one model");
}

TEST_CASE("names: identifiers and model names", "[config][errors]") {
  LoadResult r = Load(R"(
[gateway]
edge = "fra 1"
[[gateway.listeners]]
address = "127.0.0.1:0"
[[regions]]
name = "eu/west"
jurisdiction = ""
location = { lat = 1, lon = 2 }
[[models]]
name = "llama 3"
aliases = [""]
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 2, 8, "'edge' in [gateway] must be a non-empty name of letters"));
  CHECK(HasError(r, 6, 8, "'name' in [[regions]] must be a non-empty name"));
  CHECK(HasError(r, 7, 16, "'jurisdiction' in [[regions]] must be a non-empty name"));
  CHECK(HasError(r, 10, 8, "'name' in [[models]] must be a non-empty model name"));
  CHECK(HasError(r, 11, 12, "'aliases' in [[models]] must be a non-empty model name"));
  CHECK(r.errors.size() == 5);
}

TEST_CASE("model names may hold slashes and colons", "[config][errors]") {
  LoadResult r = LoadWithRegions(R"(
[[backends]]
name = "b"
region = "eu-west"
url = "http://h"
models = ["meta-llama/Llama-3.1-8B-Instruct", "llama3:8b"]
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->FindModel("meta-llama/Llama-3.1-8B-Instruct"));
  CHECK(r.snapshot->FindModel("llama3:8b"));
}

TEST_CASE("countries and continents", "[config][errors]") {
  LoadResult r = LoadWithRegions(R"(
[[residency]]
name = "eu"
countries = ["DE", "de", "DEU", "1A"]
continents = ["EU", "Europe", "eu", "AN"]
allow_jurisdictions = ["EU"]
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 13, 20,
                 "must be an ISO 3166-1 alpha-2 code in upper case like \"DE\", got \"de\""));
  CHECK(HasError(r, 13, 26, "got \"DEU\""));
  CHECK(HasError(r, 13, 33, "got \"1A\""));
  CHECK(HasError(r, 14, 21,
                 "entry of 'continents' in [[residency]] must be one of AF AN AS EU NA OC SA, "
                 "got \"Europe\""));
  CHECK(HasError(r, 14, 31, "got \"eu\""));
  CHECK(r.errors.size() == 5);
}

TEST_CASE("a rule cannot be named deny", "[config][errors]") {
  LoadResult r = LoadWithRegions(R"(
[[residency]]
name = "deny"
allow_jurisdictions = ["EU"]
)");
  REQUIRE_ONLY_ERROR(r, 12, 8, "cannot be named 'deny'");
}

// ---------------------------------------------------------------- tenants --

TEST_CASE("api_key_sha256 entries are 64 hex characters", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[tenants]]
name = "t"
api_key_sha256 = ["sk-live-abcdef", "zz00000000000000000000000000000000000000000000000000000000000000"]
[[tenants]]
name = "u"
api_key_sha256 = []
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 5, 19,
                 "entry of 'api_key_sha256' in [[tenants]] must be 64 hex characters (the "
                 "SHA-256 of the key, not the key), got 14 characters"));
  CHECK(HasError(r, 5, 37, "got 64 characters"));
  CHECK(HasError(r, 8, 18, "'api_key_sha256' in [[tenants]] must list at least one key hash"));
  CHECK(r.errors.size() == 3);
  // What might be a pasted key is never echoed.
  for (const auto& e : r.errors)
    CHECK(e.message.find("sk-live") == std::string::npos);
}

TEST_CASE("a key hash used by two tenants (or twice by one)", "[config][errors]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[[tenants]]
name = "a"
api_key_sha256 = ["2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"]
[[tenants]]
name = "b"
api_key_sha256 = ["1111111111111111111111111111111111111111111111111111111111111111",
                  "2C26B46B68FFC68FF99B453C1D30413413422D706483BFA0F98A5E886266E7AE"]
[[tenants]]
name = "c"
api_key_sha256 = ["3333333333333333333333333333333333333333333333333333333333333333",
                  "3333333333333333333333333333333333333333333333333333333333333333"]
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 9, 19, "key hash of tenant 'b' is already used by tenant 'a' (line 5)"));
  CHECK(HasError(r, 13, 19, "tenant 'c' lists the same key hash twice"));
  CHECK(r.errors.size() == 2);
}

// ------------------------------------------------------------ api_key_env --

constexpr const char* kKeyedBackend = R"(
[[backends]]
name = "b"
region = "eu-west"
url = "https://h"
models = ["m"]
api_key_env = "B_KEY"
)";

TEST_CASE("api_key_env: an unset variable is an error", "[config][errors][env]") {
  LoadResult r = LoadWithRegions(kKeyedBackend, FakeEnv({{"OTHER", "x"}}));
  REQUIRE_ONLY_ERROR(r, 16, 15,
                     "environment variable 'B_KEY' (api_key_env of backend 'b') is not set");
}

TEST_CASE("api_key_env: an empty variable is an error", "[config][errors][env]") {
  LoadResult r = LoadWithRegions(kKeyedBackend, FakeEnv({{"B_KEY", ""}}));
  REQUIRE_ONLY_ERROR(r, 16, 15, "'B_KEY' (api_key_env of backend 'b') is empty");
}

TEST_CASE("api_key_env: the value lands in api_key and is never printed", "[config][errors][env]") {
  LoadResult r = LoadWithRegions(kKeyedBackend, FakeEnv({{"B_KEY", "sk-very-secret"}}));
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->backends[0].api_key_env == "B_KEY");
  CHECK(r.snapshot->backends[0].api_key == "sk-very-secret");
  for (const auto& w : r.warnings)
    CHECK(w.find("sk-very-secret") == std::string::npos);
}

TEST_CASE("api_key_env: the secret does not leak into other errors", "[config][errors][env]") {
  LoadResult r = LoadWithRegions(R"(
[[backends]]
name = "b"
region = "nowhere"
url = "https://h"
models = ["m"]
api_key_env = "B_KEY"
capacity = 0
)",
                                 FakeEnv({{"B_KEY", "sk-very-secret"}}));
  REQUIRE(r.errors.size() == 2);
  for (const auto& e : r.errors)
    CHECK(e.ToString().find("sk-very-secret") == std::string::npos);
}

TEST_CASE("api_key_env must be a variable name", "[config][errors][env]") {
  LoadResult r = LoadWithRegions(R"(
[[backends]]
name = "b"
region = "eu-west"
url = "https://h"
models = ["m"]
api_key_env = "$B_KEY"
)");
  REQUIRE_ONLY_ERROR(r, 16, 15,
                     "'api_key_env' in [[backends]] must be an environment variable name");
}

TEST_CASE("the process environment is read by ProcessEnv", "[config][env]") {
  ::setenv("GEOGATE_CONFIG_TEST_VAR", "v1", 1);
  ::unsetenv("GEOGATE_CONFIG_TEST_UNSET");
  EnvLookup env = ProcessEnv();
  CHECK(env("GEOGATE_CONFIG_TEST_VAR") == std::optional<std::string>("v1"));
  CHECK_FALSE(env("GEOGATE_CONFIG_TEST_UNSET"));
}

// ------------------------------------------------------------- collection --

TEST_CASE("every error is collected in one pass, ordered by position", "[config][errors]") {
  LoadResult r = Load(R"(
[gateway]
workers = -1
[[gateway.listeners]]
address = "nowhere"
[health]
interval_ms = 0
timout_ms = 100
[[regions]]
name = "r"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "b"
region = "q"
url = "gopher://h"
models = ["m"]
tier = "cheap"
api_key_env = "NOPE"
[[tenants]]
name = "t"
api_key_sha256 = ["abc"]
residency = "none"
)");
  INFO(testing::Describe(r));
  REQUIRE_FALSE(r.ok());
  CHECK_FALSE(r.snapshot);
  std::vector<std::string> lines;
  for (const auto& e : r.errors)
    lines.push_back(e.ToString());
  std::vector<std::string> expected = {
      "test.toml:2:11: 'workers' in [gateway] must be between 0 and 1024, got -1",
      "test.toml:4:11: 'address' in [[gateway.listeners]]: 'nowhere' needs a port, e.g. "
      "0.0.0.0:8080",
      "test.toml:6:15: 'interval_ms' in [health] must be greater than 0, got 0",
      "test.toml:7:1: unknown key 'timout_ms' in [health] (did you mean 'timeout_ms'?)",
      "test.toml:14:10: backend 'b': region 'q' is not declared in [[regions]]",
      "test.toml:15:7: 'url' in [[backends]]: URL scheme 'gopher' is not supported (use http or "
      "https)",
      "test.toml:17:8: 'tier' in [[backends]] must be one of \"reserved\", \"on-demand\", "
      "\"spot\", got \"cheap\"",
      "test.toml:18:15: environment variable 'NOPE' (api_key_env of backend 'b') is not set",
      "test.toml:21:19: entry of 'api_key_sha256' in [[tenants]] must be 64 hex characters (the "
      "SHA-256 of the key, not the key), got 3 characters",
      "test.toml:22:13: tenant 't': residency rule 'none' is not declared in [[residency]]",
  };
  CHECK(lines == expected);
}

// --------------------------------------------------------------- warnings --

TEST_CASE("warnings do not stop a load", "[config][warnings]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
client_ip = "x-forwarded-for"
[[regions]]
name = "a"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[regions]]
name = "idle"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }
[[backends]]
name = "b"
region = "a"
url = "https://h"
models = ["small"]
vram_gb = 24
tls_verify = false
[[backends]]
name = "c"
region = "a"
url = "http://h"
models = ["small"]
tls_verify = true
[[models]]
name = "small"
min_vram_gb = 40
[[models]]
name = "unserved"
[[residency]]
name = "first"
countries = ["CH"]
allow_regions = ["a"]
[[residency]]
name = "second"
countries = ["CH", "NO"]
allow_regions = ["a"]
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(testing::HasWarning(r, "model 'unserved' ([[models]] at line 29) is served by no backend"));
  CHECK(testing::HasWarning(r, "region 'idle' has no backends"));
  CHECK(testing::HasWarning(r, "gateway.location is not set"));
  CHECK(testing::HasWarning(r, "X-Forwarded-For is never trusted"));
  CHECK(testing::HasWarning(r, "backend 'b' (line 13) has tls_verify = false"));
  CHECK(testing::HasWarning(
      r, "backend 'c' (line 20) uses http://; ca_file and tls_verify have no effect"));
  CHECK(testing::HasWarning(
      r, "backend 'b' has vram_gb 24 but serves model 'small' with min_vram_gb 40"));
  CHECK(testing::HasWarning(
      r, "country CH in residency rule 'second' never matches: rule 'first' comes first"));
  CHECK(testing::HasWarning(r, "geo.database is not set"));
  CHECK(r.warnings.size() == 9);
}

TEST_CASE("proxy-protocol client_ip without a proxy_protocol listener warns",
          "[config][warnings]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
client_ip = "proxy-protocol"
)");
  REQUIRE(r.ok());
  CHECK(testing::HasWarning(r, "listener '127.0.0.1:0' has no proxy_protocol"));
}

TEST_CASE("relay_batch is bounded to 1..4096", "[config][errors]") {
  for (const char* value : {"0", "4097"}) {
    LoadResult r = Load(std::string(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[gateway.upstream]
relay_batch = )") + value +
                        "\n");
    INFO(testing::Describe(r));
    CHECK(HasError(
        r, 4, 15,
        std::string("'relay_batch' in [gateway.upstream] must be between 1 and 4096, got ") +
            value));
  }
}

TEST_CASE("a backend naming an alias of a [[models]] without a name is an error, not a throw",
          "[config][errors]") {
  // Found by tests/fuzz/config_loader_fuzz.cc: the alias resolved to the
  // nameless model, whose empty canonical name was then looked up with
  // flat_hash_map::at, which threw std::out_of_range out of the loader (and
  // out of a reload: std::terminate).
  LoadResult r = Load(R"(
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
models = ["llama-8b"]
[[models]]
nmae = "llama-3.1-8b"
aliases = ["llama-8b"]
)");
  INFO(testing::Describe(r));
  REQUIRE_FALSE(r.ok());
  CHECK(HasError(r, 12, 1, "missing required key 'name' in [[models]]"));
  CHECK(HasError(r, 13, 1, "unknown key 'nmae' in [[models]]"));
}

}  // namespace
}  // namespace geogate::config
