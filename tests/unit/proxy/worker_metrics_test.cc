#include <catch2/catch.hpp>

#include "proxy/worker_metrics.h"

using namespace geogate::observability;
using namespace geogate::proxy;

TEST_CASE("counters merge across workers by label set", "[metrics]") {
  WorkerMetrics a, b, merged;
  a.upstream_errors.Add({"b1", "reset"});
  a.upstream_errors.Add({"b1", "reset"});
  b.upstream_errors.Add({"b1", "reset"}, 3);
  b.upstream_errors.Add({"b2", "upstream_5xx"});
  a.connections_accepted = 2;
  b.connections_accepted = 5;
  a.MergeInto(merged);
  b.MergeInto(merged);
  CHECK(merged.connections_accepted == 7);
  auto& v = merged.upstream_errors.values();
  REQUIRE(v.size() == 2);
  CHECK(v.find(LabelView<2>{"b1", "reset"})->second == 5);
  CHECK(v.find(LabelView<2>{"b2", "upstream_5xx"})->second == 1);
}
