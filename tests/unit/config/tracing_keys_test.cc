// [tracing]: off by default, the collector URL, ranges and hostile values.
#include <catch2/catch.hpp>

#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

using testing::HasError;
using testing::Load;

TEST_CASE("tracing is off by default", "[config][tracing]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  const Tracing& t = r.snapshot->tracing;
  CHECK_FALSE(t.enabled);
  CHECK(t.sampling_ratio == 1.0);
  CHECK(t.service_name == "geogate");
  CHECK(t.batch_size == 512);
  CHECK(t.batch_interval == Millis(1000));
  CHECK(t.queue_limit == 8192);
  CHECK(t.export_timeout == Millis(2000));
  CHECK(t.connect_timeout == Millis(1000));
  CHECK(t.flush_timeout == Millis(2000));
  CHECK_FALSE(t.collector_tls);
  CHECK(t.ca_file.empty());
}

TEST_CASE("tracing keys as written", "[config][tracing]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[tracing]
enabled = true
collector_url = "http://otel-collector.observability:4318"
sampling_ratio = 0.25
service_name = "edge-gateway"
batch_size = 100
batch_interval_ms = 250
queue_limit = 1000
export_timeout_ms = 500
connect_timeout_ms = 250
flush_timeout_ms = 0
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  const Tracing& t = r.snapshot->tracing;
  CHECK(t.enabled);
  CHECK(t.collector_host == "otel-collector.observability");
  CHECK(t.collector_port == 4318);
  CHECK(t.collector_path == "/v1/traces");
  CHECK(t.sampling_ratio == 0.25);
  CHECK(t.service_name == "edge-gateway");
  CHECK(t.batch_size == 100);
  CHECK(t.batch_interval == Millis(250));
  CHECK(t.queue_limit == 1000);
  CHECK(t.export_timeout == Millis(500));
  CHECK(t.connect_timeout == Millis(250));
  CHECK(t.flush_timeout == Millis(0));  // 0: drop what is queued at shutdown
  CHECK_FALSE(t.collector_tls);

  r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[tracing]
enabled = true
collector_url = "http://[::1]/otlp/v1/traces"
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->tracing.collector_host == "::1");
  CHECK(r.snapshot->tracing.collector_port == 80);
  CHECK(r.snapshot->tracing.collector_path == "/otlp/v1/traces");
}

TEST_CASE("tracing refuses bad and hostile values", "[config][tracing]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[tracing]
enabled = true
)");
  CHECK(HasError(r, 3, 1, "missing required key 'collector_url' in [tracing]"));

  r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[tracing]
enabled = true
collector_url = "ftp://collector:4318"
sampling_ratio = 1.5
service_name = "edge gw\n"
batch_size = 0
batch_interval_ms = 5
queue_limit = 10000000
export_timeout_ms = 60001
exporter = "otlp"
connect_timeout_ms = 5
flush_timeout_ms = -1
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 5, 17, "'collector_url' in [tracing]"));
  CHECK(HasError(r, 6, 18, "'sampling_ratio' in [tracing] must be between 0 and 1, got 1.5"));
  CHECK(HasError(r, 7, 16, "'service_name' in [tracing] must be a non-empty name"));
  CHECK(HasError(r, 8, 14, "'batch_size' in [tracing] must be between 1 and 10000, got 0"));
  CHECK(HasError(r, 9, 21, "'batch_interval_ms' in [tracing] must be between 10 and 60000"));
  CHECK(HasError(r, 10, 15, "'queue_limit' in [tracing] must be between 1 and 1000000"));
  CHECK(HasError(r, 11, 21, "'export_timeout_ms' in [tracing] must be between 10 and 60000"));
  CHECK(HasError(r, 12, 1, "unknown key 'exporter' in [tracing]"));
  CHECK(HasError(r, 13, 22, "'connect_timeout_ms' in [tracing] must be between 10 and 60000"));
  CHECK(HasError(r, 14, 20, "'flush_timeout_ms' in [tracing] must be between 0 and 60000"));

  r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[tracing]
enabled = true
collector_url = "collector:4318"
batch_size = 200
queue_limit = 100
sampling_ratio = nan
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 5, 17, "'collector_url' in [tracing]: 'collector:4318' is not a URL"));
  CHECK(HasError(r, 7, 15, "'queue_limit' in [tracing] (100) must be at least batch_size (200)"));
  CHECK(HasError(r, 8, 18, "'sampling_ratio' in [tracing]"));
}

TEST_CASE("an https collector: TLS, port 443, a CA file checked", "[config][tracing]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[tracing]
enabled = true
collector_url = "https://otlp.example.com"
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  const Tracing& t = r.snapshot->tracing;
  CHECK(t.collector_tls);
  CHECK(t.collector_host == "otlp.example.com");
  CHECK(t.collector_port == 443);
  CHECK(t.collector_path == "/v1/traces");
  CHECK(t.ca_file.empty());  // the system's CAs

  r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[tracing]
enabled = true
collector_url = "https://otlp.example.com:4318"
ca_file = "/nonexistent/otlp-ca.pem"
)");
  CHECK(HasError(r, 6, 11, "/nonexistent/otlp-ca.pem"));
}

TEST_CASE("a disabled tracing table may omit the collector", "[config][tracing]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[tracing]
sampling_ratio = 0
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK_FALSE(r.snapshot->tracing.enabled);
  CHECK(r.snapshot->tracing.sampling_ratio == 0);
}

}  // namespace
}  // namespace geogate::config
