// Every key left out takes the default documented in DESIGN.md §5,
// snapshot.h and docs/configuration.md.
#include <catch2/catch.hpp>

#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

TEST_CASE("a config with only a listener takes every default", "[config][defaults]") {
  LoadResult r = testing::Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:8080"
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  const Snapshot& s = *r.snapshot;

  const Gateway& g = s.gateway;
  CHECK(g.edge == "edge");
  CHECK(g.location.lat == 0);
  CHECK(g.location.lon == 0);
  CHECK(g.workers == 0);
  CHECK(g.access_log == "-");
  CHECK_FALSE(g.residency_header);
  REQUIRE(g.listeners.size() == 1);
  CHECK_FALSE(g.listeners[0].tls);
  CHECK_FALSE(g.listeners[0].proxy_protocol);

  CHECK(g.admin.address == "127.0.0.1:9901");
  CHECK(g.admin.host == "127.0.0.1");
  CHECK(g.admin.port == 9901);

  CHECK(g.limits.max_header_bytes == 16384);
  CHECK(g.limits.max_body_bytes == 4194304);
  CHECK(g.limits.header_timeout == Millis(10000));
  CHECK(g.limits.idle_timeout == Millis(60000));
  CHECK(g.limits.park_after == Millis(100));
  CHECK(g.limits.body_timeout == Millis(30000));
  CHECK(g.limits.max_connections == 10000);
  CHECK(g.limits.max_connections_per_ip == 0);

  const Upstream& u = g.upstream;
  CHECK(u.connect_timeout == Millis(500));
  CHECK(u.first_token_timeout == Millis(30000));
  CHECK(u.stream_idle_timeout == Millis(60000));
  CHECK(u.max_attempts == 3);
  CHECK(u.retry_deadline == Millis(10000));
  CHECK(u.drain_delay == Millis(2000));
  CHECK(u.drain_timeout == Millis(30000));
  CHECK(u.retry_budget_percent == 20);
  CHECK(u.retry_budget_min == 3);
  CHECK_FALSE(u.pool_max_idle.has_value());  // the backend's capacity
  CHECK(u.pool_idle_timeout == Millis(30000));
  CHECK(u.relay_batch == 16);

  const Geo& geo = s.geo;
  CHECK(geo.database.empty());
  CHECK(geo.client_ip == ClientIpSource::kPeer);
  CHECK(geo.trusted_proxies.empty());
  CHECK(geo.unknown == "deny");
  CHECK_FALSE(geo.unknown_rule);
  CHECK(geo.country_field == "country.iso_code");
  CHECK(geo.continent_field == "continent.code");
  CHECK(geo.subdivision_field == "subdivisions.0.iso_code");
  CHECK(geo.latitude_field == "location.latitude");
  CHECK(geo.longitude_field == "location.longitude");

  const Health& h = s.health;
  CHECK(h.path == "/health");
  CHECK(h.interval == Millis(100));
  CHECK(h.timeout == Millis(200));
  CHECK(h.unhealthy_threshold == 2);
  CHECK(h.healthy_threshold == 2);
  CHECK(h.changing_interval == Millis(50));
  CHECK(h.jitter_percent == 10);
  CHECK(h.outlier_consecutive_failures == 3);
  CHECK(h.outlier_base_ejection == Millis(5000));
  CHECK(h.outlier_max_ejection == Millis(300000));
  CHECK(h.max_ejection_percent == 50);
  CHECK(h.load_report == "auto");

  const Routing& rt = s.routing;
  CHECK(rt.latency_slack == Millis(80));
  CHECK(rt.tie == Millis(2));
  CHECK(rt.prior_ttft == Millis(50));
  CHECK(rt.queue_timeout == Millis(0));
  CHECK(rt.ewma_alpha == Approx(0.05));
  CHECK(rt.sample_stale == Millis(10000));

  CHECK(s.regions.empty());
  CHECK(s.backends.empty());
  CHECK(s.models.empty());
  CHECK(s.residency.empty());
  CHECK(s.tenants.empty());
  CHECK(s.backends_by_model.empty());
  CHECK(s.tenant_by_key_hash.empty());

  // Zero backends is allowed but worth a warning.
  CHECK(testing::HasWarning(r, "no [[backends]]"));
}

TEST_CASE("backend, model and tenant defaults", "[config][defaults]") {
  LoadResult r = testing::Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:8080"

[[regions]]
name = "r1"
jurisdiction = "EU"
location = { lat = 1, lon = 2 }

[[backends]]
name = "b1"
region = "r1"
url = "http://backend.internal"
models = ["m"]

[[models]]
name = "m"

[[residency]]
name = "all"
allow_regions = ["r1"]

[[tenants]]
name = "t"
api_key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000000"]
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.warnings.empty());
  const Snapshot& s = *r.snapshot;

  const Backend& b = s.backends[0];
  CHECK(b.host == "backend.internal");
  CHECK(b.port == 80);
  CHECK_FALSE(b.tls);
  CHECK(b.base_path.empty());
  CHECK(b.gpu.empty());
  CHECK(b.provider.empty());
  CHECK(b.tier == Tier::kOnDemand);
  CHECK(b.capacity == 64);
  CHECK(b.cost_per_hour == 0);
  CHECK(b.weight == 1);
  CHECK_FALSE(b.vram_gb);
  CHECK(b.api_key_env.empty());
  CHECK(b.api_key.empty());
  CHECK(b.ca_file.empty());
  CHECK(b.tls_verify);

  const Model& m = s.models[0];
  CHECK(m.aliases.empty());
  CHECK(m.gpu_preference.empty());
  CHECK_FALSE(m.min_vram_gb);

  CHECK(s.residency[0].countries.empty());
  CHECK(s.residency[0].continents.empty());

  const Tenant& t = s.tenants[0];
  CHECK(t.residency.empty());
  CHECK_FALSE(t.residency_rule);
  CHECK_FALSE(t.allow_spot);
  CHECK(t.requests_per_second == 0);
  CHECK(t.burst == 0);
  CHECK(t.max_concurrent == 0);
  CHECK_FALSE(t.monthly_budget);
}

TEST_CASE("empty sections are the same as absent ones", "[config][defaults]") {
  LoadResult r = testing::Load(R"(
[gateway]
[[gateway.listeners]]
address = "127.0.0.1:8080"
[gateway.admin]
[gateway.limits]
[gateway.upstream]
[geo]
[health]
[routing]
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->gateway.admin.port == 9901);
  CHECK(r.snapshot->health.interval == Millis(100));
}

TEST_CASE("geo.database = \"\" means no database", "[config][defaults]") {
  LoadResult r = testing::Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:8080"
[geo]
database = ""
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->geo.database.empty());
}

TEST_CASE("access_log \"\" is off and \"-\" is stdout", "[config][defaults]") {
  for (const char* value : {"", "-"}) {
    std::string text = std::string("[gateway]\naccess_log = \"") + value +
                       "\"\n[[gateway.listeners]]\naddress = \"127.0.0.1:1\"\n";
    LoadResult r = LoadString(text, "test.toml", "/", testing::FakeEnv());
    INFO(testing::Describe(r));
    REQUIRE(r.ok());
    CHECK(r.snapshot->gateway.access_log == value);
  }
}

TEST_CASE("integers are accepted where a float is expected", "[config][defaults]") {
  LoadResult r = testing::Load(R"(
[gateway]
location = { lat = 50, lon = 8 }
[[gateway.listeners]]
address = "127.0.0.1:8080"
[routing]
ewma_alpha = 1
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->gateway.location.lat == 50);
  CHECK(r.snapshot->routing.ewma_alpha == 1);
}

}  // namespace
}  // namespace geogate::config
