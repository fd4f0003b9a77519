#include "health/load_report_parser.h"

#include <catch2/catch.hpp>

using namespace geogate::health;

TEST_CASE("load: JSON probe body", "[health][load]") {
  auto r =
      ParseJsonLoad(R"({"status":"ok","queue_depth":3,"inflight":17,"kv_cache_utilization":0.42})");
  REQUIRE(r);
  CHECK(r->queue_depth == 3);
  CHECK(r->inflight == 17);
  CHECK(r->kv_cache_utilization == Approx(0.42));
  CHECK(r->at_ns == 0);

  auto vllm = ParseJsonLoad(R"({"num_requests_waiting":2.0,"num_requests_running":9})");
  REQUIRE(vllm);
  CHECK(vllm->queue_depth == 2);
  CHECK(vllm->inflight == 9);
  CHECK(vllm->kv_cache_utilization < 0);

  auto partial = ParseJsonLoad(R"({"kv_cache_utilization":1.7,"inflight":"x"})");
  REQUIRE(partial);
  CHECK(partial->kv_cache_utilization == Approx(1.0));  // clamped to 0..1
  CHECK(partial->inflight == -1);

  CHECK_FALSE(ParseJsonLoad(R"({"status":"ok"})"));
  CHECK_FALSE(ParseJsonLoad("OK"));
  CHECK_FALSE(ParseJsonLoad("[1,2]"));
  CHECK_FALSE(ParseJsonLoad(""));
  CHECK_FALSE(ParseJsonLoad(R"({"queue_depth":)"));
}

TEST_CASE("load: vLLM Prometheus gauges", "[health][load]") {
  const char* body =
      "# HELP vllm:num_requests_running Number of requests currently running on GPU.\n"
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{model_name=\"llama\"} 5.0\n"
      "vllm:num_requests_running{model_name=\"other\"} 2.0\n"
      "vllm:num_requests_waiting{model_name=\"llama\",note=\"a}b \\\"q\\\"\"} 3.0\r\n"
      "vllm:num_requests_waiting_total 99\n"
      "vllm:gpu_cache_usage_perc{model_name=\"llama\"} 0.25 1700000000000\n"
      "vllm:time_to_first_token_seconds_bucket{le=\"0.001\"} 0.0\n"
      "vllm:kv_cache_usage_perc{model_name=\"other\"} 0.5";
  auto r = ParsePrometheusLoad(body);
  REQUIRE(r);
  CHECK(r->inflight == 7);                        // summed over models
  CHECK(r->queue_depth == 3);                     // the _total series is another metric
  CHECK(r->kv_cache_utilization == Approx(0.5));  // the highest, last line without newline
}

TEST_CASE("load: Prometheus scanning is chunk-agnostic and bounded", "[health][load]") {
  const std::string body =
      "vllm:num_requests_waiting 4\nvllm:num_requests_running 6\nvllm:gpu_cache_usage_perc 0.1\n";
  for (size_t step = 1; step <= body.size(); ++step) {
    PrometheusLoadScanner scanner;
    for (size_t i = 0; i < body.size(); i += step)
      scanner.feed(std::string_view(body).substr(i, step));
    scanner.finish();
    auto r = scanner.result();
    REQUIRE(r);
    CHECK(r->queue_depth == 4);
    CHECK(r->inflight == 6);
  }
  // An overlong line is skipped, the next one still read.
  PrometheusLoadScanner scanner;
  scanner.feed("vllm:num_requests_waiting{x=\"" + std::string(10000, 'a') + "\"} 1\n");
  scanner.feed("vllm:num_requests_running 2\n");
  scanner.finish();
  auto r = scanner.result();
  REQUIRE(r);
  CHECK(r->queue_depth == -1);
  CHECK(r->inflight == 2);

  CHECK_FALSE(ParsePrometheusLoad("# nothing\nfoo 1\n"));
  CHECK_FALSE(ParsePrometheusLoad("vllm:num_requests_waiting NaN\nvllm:num_requests_running\n"));
}
