// geogate_gpu_seconds_total and geogate_cost_dollars_total: per worker,
// merged at scrape time.
#include <catch2/catch.hpp>

#include "accounting/showback_counters.h"

namespace geogate::accounting {
namespace {

ShowbackRecord Rec(std::string tenant, double gpu_seconds, double cost) {
  ShowbackRecord r;
  r.tenant = std::move(tenant);
  r.backend = "eu-h100-r1";
  r.model = "llama-70b";
  r.gpu_seconds = gpu_seconds;
  r.cost = cost;
  return r;
}

TEST_CASE("GPU-seconds and cost counters add per worker and merge", "[showback][metrics]") {
  ShowbackCounters a, b, merged;
  a.Add(Rec("acme", 0.46875, 0.00032421875));
  a.Add(Rec("acme", 0.5, 0.25));
  b.Add(Rec("acme", 1, 0.5));
  b.Add(Rec("", 2, 1));  // no tenants configured
  a.MergeInto(merged);
  b.MergeInto(merged);
  observability::PromWriter w;
  WriteShowbackCounters(w, merged);
  const std::string& text = w.text();
  CHECK(text.find("# TYPE geogate_gpu_seconds_total counter\n") != std::string::npos);
  CHECK(text.find("geogate_gpu_seconds_total{tenant=\"acme\",backend=\"eu-h100-r1\","
                  "model=\"llama-70b\"} 1.96875\n") != std::string::npos);
  CHECK(text.find("geogate_cost_dollars_total{tenant=\"acme\",backend=\"eu-h100-r1\","
                  "model=\"llama-70b\"} 0.750324219\n") != std::string::npos);
  CHECK(text.find("geogate_cost_dollars_total{tenant=\"none\",backend=\"eu-h100-r1\","
                  "model=\"llama-70b\"} 1\n") != std::string::npos);
}

}  // namespace
}  // namespace geogate::accounting
