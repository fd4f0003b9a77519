// The DESIGN.md §5 example plus every extra key, loaded end to end, and the
// lookup tables derived from it.
#include <catch2/catch.hpp>

#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

using testing::FakeEnv;
using testing::TempDir;

constexpr const char* kAcmeHash =
    "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
constexpr const char* kBetaHash =
    "FCDE2B2EDBA56BF408601FB721FE9B5C338D10EE429EA04FAE5511B68FBF8FB9";

constexpr const char* kFull = R"(
version = 1

[gateway]
edge = "fra1"
location = { lat = 50.11, lon = 8.68 }
workers = 4
access_log = "logs/access.log"
residency_header = true

[[gateway.listeners]]
address = "0.0.0.0:8080"
[[gateway.listeners]]
address = "[::]:8443"
tls = { cert = "certs/edge.pem", key = "certs/edge.key" }
proxy_protocol = true

[gateway.admin]
address = "127.0.0.1:9902"

[gateway.limits]
max_header_bytes = 32768
max_body_bytes = 1048576
header_timeout_ms = 5000
idle_timeout_ms = 30000
park_after_ms = 0
body_timeout_ms = 15000
max_connections = 20000
max_connections_per_ip = 64

[gateway.upstream]
connect_timeout_ms = 250
first_token_timeout_ms = 20000
stream_idle_timeout_ms = 45000
max_attempts = 4
retry_deadline_ms = 8000
drain_delay_ms = 1000
drain_timeout_ms = 20000
retry_budget_percent = 25
retry_budget_min = 5
pool_max_idle = 32
pool_idle_timeout_ms = 15000
relay_batch = 64

[geo]
database = "GeoLite2-City.mmdb"
client_ip = "x-forwarded-for"
trusted_proxies = ["127.0.0.0/8", "10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]
unknown = "eu"
country_field = "country_code"
continent_field = "continent_code"
subdivision_field = "subdivisions.0.iso_code"
latitude_field = "location.latitude"
longitude_field = "location.longitude"

[health]
path = "/healthz"
interval_ms = 150
timeout_ms = 300
unhealthy_threshold = 3
healthy_threshold = 4
changing_interval_ms = 40
jitter_percent = 5
outlier_consecutive_failures = 6
outlier_base_ejection_ms = 2000
outlier_max_ejection_ms = 60000
max_ejection_percent = 30
load_report = "/load"

[routing]
latency_slack_ms = 25
tie_ms = 3
prior_ttft_ms = 60
queue_timeout_ms = 100
ewma_alpha = 0.5
sample_stale_ms = 5000

[[regions]]
name = "eu-west"
jurisdiction = "EU"
location = { lat = 53.35, lon = -6.26 }

[[regions]]
name = "eu-central"
jurisdiction = "EU"
location = { lat = 50.11, lon = 8.68 }

[[regions]]
name = "us-east"
jurisdiction = "US"
location = { lat = 38.9, lon = -77.0 }

[[backends]]
name = "eu-west-h100-1"
region = "eu-west"
url = "http://10.0.1.10:8000"
models = ["llama-3.1-70b", "llama-8b"]
gpu = "H100"
provider = "provider-a"
tier = "reserved"
capacity = 64
cost_per_hour = 2.49
weight = 2
vram_gb = 80
api_key_env = "EU_WEST_KEY"

[[backends]]
name = "eu-central-l4-1"
region = "eu-central"
url = "https://gpu.example.com/v1/"
models = ["llama-3.1-8b"]
gpu = "L4"
provider = "provider-b"
tier = "spot"
capacity = 8
cost_per_hour = 0.8
ca_file = "certs/ca.pem"
tls_verify = true

[[backends]]
name = "us-east-a100-1"
region = "us-east"
url = "https://[2001:db8::10]:9443"
models = ["llama-3.1-70b", "mixtral-8x7b"]
gpu = "A100"
tier = "on-demand"

[[models]]
name = "llama-3.1-8b"
aliases = ["llama-8b", "llama3-8b"]
gpu_preference = ["L4", "T4", "H100"]
min_vram_gb = 16

[[models]]
name = "llama-3.1-70b"
aliases = ["llama-70b"]

[[residency]]
name = "eu"
continents = ["EU"]
countries = ["CH", "NO"]
allow_jurisdictions = ["EU"]

[[residency]]
name = "us-only"
allow_regions = ["us-east"]

[[tenants]]
name = "acme"
api_key_sha256 = ["2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"]
residency = "eu"
allow_spot = false
requests_per_second = 50
burst = 100
max_concurrent = 100
monthly_budget = 5000.5

[[tenants]]
name = "beta"
api_key_sha256 = ["FCDE2B2EDBA56BF408601FB721FE9B5C338D10EE429EA04FAE5511B68FBF8FB9"]
allow_spot = true
)";

struct FullFixture {
  TempDir dir;
  FullFixture() {
    dir.Write("certs/edge.pem");
    dir.Write("certs/edge.key");
    dir.Write("certs/ca.pem");
    dir.Write("GeoLite2-City.mmdb");
    std::filesystem::create_directories(dir.path() / "logs");
  }
  LoadResult Load() const {
    return testing::Load(kFull, FakeEnv({{"EU_WEST_KEY", "sk-secret-eu"}}), dir.str());
  }
};

std::array<uint8_t, 32> Bytes(std::string_view hex) {
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < 32; ++i)
    out[i] = static_cast<uint8_t>(std::stoi(std::string(hex.substr(2 * i, 2)), nullptr, 16));
  return out;
}

TEST_CASE("the full example loads with every value as written", "[config][loader]") {
  FullFixture f;
  LoadResult r = f.Load();
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  REQUIRE(r.errors.empty());
  const Snapshot& s = *r.snapshot;

  const Gateway& g = s.gateway;
  CHECK(g.edge == "fra1");
  CHECK(g.location.lat == Approx(50.11));
  CHECK(g.location.lon == Approx(8.68));
  CHECK(g.workers == 4);
  CHECK(g.access_log == (f.dir.path() / "logs/access.log").string());
  CHECK(g.residency_header);

  REQUIRE(g.listeners.size() == 2);
  CHECK(g.listeners[0].address == "0.0.0.0:8080");
  CHECK(g.listeners[0].host == "0.0.0.0");
  CHECK(g.listeners[0].port == 8080);
  CHECK_FALSE(g.listeners[0].tls);
  CHECK_FALSE(g.listeners[0].proxy_protocol);
  CHECK(g.listeners[1].address == "[::]:8443");
  CHECK(g.listeners[1].host == "::");
  CHECK(g.listeners[1].port == 8443);
  REQUIRE(g.listeners[1].tls);
  CHECK(g.listeners[1].tls->cert == (f.dir.path() / "certs/edge.pem").string());
  CHECK(g.listeners[1].tls->key == (f.dir.path() / "certs/edge.key").string());
  CHECK(g.listeners[1].proxy_protocol);

  CHECK(g.admin.address == "127.0.0.1:9902");
  CHECK(g.admin.host == "127.0.0.1");
  CHECK(g.admin.port == 9902);

  CHECK(g.limits.max_header_bytes == 32768);
  CHECK(g.limits.max_body_bytes == 1048576);
  CHECK(g.limits.header_timeout == Millis(5000));
  CHECK(g.limits.idle_timeout == Millis(30000));
  CHECK(g.limits.park_after == Millis(0));
  CHECK(g.limits.body_timeout == Millis(15000));
  CHECK(g.limits.max_connections == 20000);
  CHECK(g.limits.max_connections_per_ip == 64);

  const Upstream& u = g.upstream;
  CHECK(u.connect_timeout == Millis(250));
  CHECK(u.first_token_timeout == Millis(20000));
  CHECK(u.stream_idle_timeout == Millis(45000));
  CHECK(u.max_attempts == 4);
  CHECK(u.retry_deadline == Millis(8000));
  CHECK(u.drain_delay == Millis(1000));
  CHECK(u.drain_timeout == Millis(20000));
  CHECK(u.retry_budget_percent == 25);
  CHECK(u.retry_budget_min == 5);
  CHECK(u.pool_max_idle == 32);
  CHECK(u.pool_idle_timeout == Millis(15000));
  CHECK(u.relay_batch == 64);

  const Geo& geo = s.geo;
  CHECK(geo.database == (f.dir.path() / "GeoLite2-City.mmdb").string());
  CHECK(geo.client_ip == ClientIpSource::kXForwardedFor);
  REQUIRE(geo.trusted_proxies.size() == 4);
  CHECK(geo.trusted_proxies[0].prefix_len == 8 + 96);
  CHECK(geo.trusted_proxies[2].prefix_len == 32);
  CHECK(geo.trusted_proxies[3].prefix_len == 128);
  CHECK(geo.unknown == "eu");
  REQUIRE(geo.unknown_rule);
  CHECK(*geo.unknown_rule == 0);
  CHECK(geo.country_field == "country_code");
  CHECK(geo.continent_field == "continent_code");
  CHECK(geo.subdivision_field == "subdivisions.0.iso_code");
  CHECK(geo.latitude_field == "location.latitude");
  CHECK(geo.longitude_field == "location.longitude");

  const Health& h = s.health;
  CHECK(h.path == "/healthz");
  CHECK(h.interval == Millis(150));
  CHECK(h.timeout == Millis(300));
  CHECK(h.unhealthy_threshold == 3);
  CHECK(h.healthy_threshold == 4);
  CHECK(h.changing_interval == Millis(40));
  CHECK(h.jitter_percent == 5);
  CHECK(h.outlier_consecutive_failures == 6);
  CHECK(h.outlier_base_ejection == Millis(2000));
  CHECK(h.outlier_max_ejection == Millis(60000));
  CHECK(h.max_ejection_percent == 30);
  CHECK(h.load_report == "/load");

  const Routing& rt = s.routing;
  CHECK(rt.latency_slack == Millis(25));
  CHECK(rt.tie == Millis(3));
  CHECK(rt.prior_ttft == Millis(60));
  CHECK(rt.queue_timeout == Millis(100));
  CHECK(rt.ewma_alpha == Approx(0.5));
  CHECK(rt.sample_stale == Millis(5000));

  REQUIRE(s.regions.size() == 3);
  CHECK(s.regions[0].name == "eu-west");
  CHECK(s.regions[0].jurisdiction == "EU");
  CHECK(s.regions[0].location.lat == Approx(53.35));
  CHECK(s.regions[0].location.lon == Approx(-6.26));

  REQUIRE(s.backends.size() == 3);
  const Backend& b0 = s.backends[0];
  CHECK(b0.name == "eu-west-h100-1");
  CHECK(b0.region == "eu-west");
  CHECK(b0.region_index == 0);
  CHECK(b0.url == "http://10.0.1.10:8000");
  CHECK_FALSE(b0.tls);
  CHECK(b0.host == "10.0.1.10");
  CHECK(b0.port == 8000);
  CHECK(b0.base_path.empty());
  CHECK(b0.models == std::vector<std::string>{"llama-3.1-70b", "llama-3.1-8b"});
  CHECK(b0.gpu == "H100");
  CHECK(b0.provider == "provider-a");
  CHECK(b0.tier == Tier::kReserved);
  CHECK(b0.capacity == 64);
  CHECK(b0.cost_per_hour == Approx(2.49));
  CHECK(b0.weight == Approx(2));
  REQUIRE(b0.vram_gb);
  CHECK(*b0.vram_gb == Approx(80));
  CHECK(b0.api_key_env == "EU_WEST_KEY");
  CHECK(b0.api_key == "sk-secret-eu");
  CHECK(b0.ca_file.empty());
  CHECK(b0.tls_verify);

  const Backend& b1 = s.backends[1];
  CHECK(b1.tls);
  CHECK(b1.host == "gpu.example.com");
  CHECK(b1.port == 443);
  CHECK(
      b1.base_path.empty());  // "https://gpu.example.com/v1/": the /v1 is the API's (DESIGN.md §8)
  CHECK(b1.tier == Tier::kSpot);
  CHECK(b1.ca_file == (f.dir.path() / "certs/ca.pem").string());
  CHECK(b1.api_key.empty());

  const Backend& b2 = s.backends[2];
  CHECK(b2.host == "2001:db8::10");
  CHECK(b2.port == 9443);
  CHECK(b2.tier == Tier::kOnDemand);
  CHECK(b2.capacity == 64);
  CHECK(b2.cost_per_hour == 0);
  CHECK(b2.weight == 1);
  CHECK_FALSE(b2.vram_gb);

  REQUIRE(s.residency.size() == 2);
  CHECK(s.residency[0].continents == std::vector<std::string>{"EU"});
  CHECK(s.residency[0].countries == std::vector<std::string>{"CH", "NO"});
  CHECK(s.residency[0].allow_jurisdictions == std::vector<std::string>{"EU"});

  REQUIRE(s.tenants.size() == 2);
  const Tenant& acme = s.tenants[0];
  CHECK(acme.name == "acme");
  REQUIRE(acme.api_key_sha256.size() == 1);
  CHECK(acme.api_key_sha256[0] == Bytes(kAcmeHash));
  CHECK(acme.residency == "eu");
  REQUIRE(acme.residency_rule);
  CHECK(*acme.residency_rule == 0);
  CHECK_FALSE(acme.allow_spot);
  CHECK(acme.requests_per_second == 50);
  CHECK(acme.burst == 100);
  CHECK(acme.max_concurrent == 100);
  REQUIRE(acme.monthly_budget);
  CHECK(*acme.monthly_budget == Approx(5000.5));
  const Tenant& beta = s.tenants[1];
  CHECK(beta.api_key_sha256[0] == Bytes(kBetaHash));  // upper-case hex accepted
  CHECK(beta.allow_spot);
  CHECK_FALSE(beta.residency_rule);
  CHECK_FALSE(beta.monthly_budget);
}

TEST_CASE("derived lookup tables", "[config][loader]") {
  FullFixture f;
  LoadResult r = f.Load();
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  const Snapshot& s = *r.snapshot;

  CHECK(s.region_by_name.at("eu-west") == 0);
  CHECK(s.region_by_name.at("eu-central") == 1);
  CHECK(s.region_by_name.at("us-east") == 2);
  CHECK(s.backend_by_name.at("eu-west-h100-1") == 0);
  CHECK(s.backend_by_name.at("us-east-a100-1") == 2);
  CHECK(s.rule_by_name.at("eu") == 0);
  CHECK(s.rule_by_name.at("us-only") == 1);

  RegionSet eu(3);
  eu.insert(0);
  eu.insert(1);
  CHECK(s.regions_by_jurisdiction.at("EU") == eu);
  RegionSet us(3);
  us.insert(2);
  CHECK(s.regions_by_jurisdiction.at("US") == us);
  CHECK(s.residency[0].allowed == eu);
  CHECK(s.residency[1].allowed == us);
  CHECK(s.residency[0].allowed.universe() == 3);

  std::string acme_key;
  for (uint8_t byte : Bytes(kAcmeHash))
    acme_key.push_back(static_cast<char>(byte));
  std::string beta_key;
  for (uint8_t byte : Bytes(kBetaHash))
    beta_key.push_back(static_cast<char>(byte));
  CHECK(s.tenant_by_key_hash.size() == 2);
  CHECK(s.tenant_by_key_hash.at(acme_key) == 0);
  CHECK(s.tenant_by_key_hash.at(beta_key) == 1);
  CHECK(s.AllRegions().count() == 3);
}

TEST_CASE("models: declared first, then implied by backends; aliases normalised",
          "[config][loader][models]") {
  FullFixture f;
  LoadResult r = f.Load();
  REQUIRE(r.ok());
  const Snapshot& s = *r.snapshot;

  // [[models]] in file order, then models only a backend names.
  REQUIRE(s.models.size() == 3);
  CHECK(s.models[0].name == "llama-3.1-8b");
  CHECK(s.models[0].aliases == std::vector<std::string>{"llama-8b", "llama3-8b"});
  CHECK(s.models[0].gpu_preference == std::vector<std::string>{"L4", "T4", "H100"});
  REQUIRE(s.models[0].min_vram_gb);
  CHECK(*s.models[0].min_vram_gb == Approx(16));
  CHECK(s.models[1].name == "llama-3.1-70b");
  CHECK(s.models[2].name == "mixtral-8x7b");
  CHECK(s.models[2].aliases.empty());

  CHECK(s.FindModel("llama-3.1-8b") == 0u);
  CHECK(s.FindModel("llama-8b") == 0u);
  CHECK(s.FindModel("llama3-8b") == 0u);
  CHECK(s.FindModel("llama-70b") == 1u);
  CHECK(s.FindModel("mixtral-8x7b") == 2u);
  CHECK_FALSE(s.FindModel("gpt-4"));
  CHECK(s.model_by_name.size() == 6);

  // eu-west lists "llama-8b": stored as the canonical name.
  CHECK(s.backends[0].models == std::vector<std::string>{"llama-3.1-70b", "llama-3.1-8b"});
  REQUIRE(s.backends_by_model.size() == 3);
  CHECK(s.backends_by_model[0] == std::vector<size_t>{0, 1});
  CHECK(s.backends_by_model[1] == std::vector<size_t>{0, 2});
  CHECK(s.backends_by_model[2] == std::vector<size_t>{2});
}

TEST_CASE("provenance: hash of the bytes, absolute source path, generation 0", "[config][loader]") {
  FullFixture f;
  LoadResult r = f.Load();
  REQUIRE(r.ok());
  const Snapshot& s = *r.snapshot;
  CHECK(s.source_path == (f.dir.path() / "test.toml").string());
  CHECK(s.hash.size() == 64);
  CHECK(s.hash.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(s.generation == 0);
  CHECK(s.loaded_at > absl::Now() - absl::Minutes(1));
  CHECK(s.loaded_at <= absl::Now());

  // Same bytes, same hash; one changed byte, another hash.
  LoadResult again = f.Load();
  REQUIRE(again.ok());
  CHECK(again.snapshot->hash == s.hash);
  std::string changed = std::string(testing::Toml(kFull)) + "\n";
  LoadResult other = LoadString(changed, "test.toml", f.dir.str(), FakeEnv({{"EU_WEST_KEY", "k"}}));
  REQUIRE(other.ok());
  CHECK(other.snapshot->hash != s.hash);
}

TEST_CASE("the hash is the SHA-256 of the file's bytes", "[config][loader]") {
  LoadResult r = testing::Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  // sha256 of "[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\n" (as computed by sha256sum).
  CHECK(r.snapshot->hash == "b9eba90b4b60213477a3d27bb6fd1906acae6a7e9a429b41ef8d67b293c5b06e");
}

}  // namespace
}  // namespace geogate::config
