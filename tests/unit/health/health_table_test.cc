#include "health/health_table.h"

#include <catch2/catch.hpp>

#include "test_support.h"

using namespace geogate::health;
using namespace geogate::health::testing;

TEST_CASE("table: a reload keeps state by name and URL", "[health][table]") {
  HealthTable table;
  auto v1 = MakeSnapshot({MakeBackend("a", 0, 1), MakeBackend("b", 0, 2), MakeBackend("c", 1, 3)});
  auto s1 = table.Bind(*v1);
  REQUIRE(s1.size() == 3);
  CHECK(table.size() == 3);
  s1[0]->state.store(HealthState::kHealthy);
  s1[0]->ttft_ewma_us.store(1234);
  s1[0]->inflight.store(5);
  s1[1]->state.store(HealthState::kHealthy);
  std::weak_ptr<BackendState> removed = s1[2];

  // v2: "a" unchanged (moved in the list), "b" at a new URL, "c" gone, "d" new.
  auto b2 = MakeBackend("b", 0, 22);
  auto v2 = MakeSnapshot({MakeBackend("d", 1, 4), b2, MakeBackend("a", 0, 1)});
  auto s2 = table.Bind(*v2);
  REQUIRE(s2.size() == 3);
  CHECK(s2[2] == s1[0]);  // same object: health, EWMAs, in-flight carry over
  CHECK(s2[2]->ttft_ewma_us.load() == 1234);
  CHECK(s2[2]->inflight.load() == 5);
  CHECK(s2[1] != s1[1]);  // changed URL: fresh health
  CHECK(s2[1]->state.load() == HealthState::kUnknown);
  CHECK(s2[1]->key() == b2.state_key());
  CHECK(s2[0]->state.load() == HealthState::kUnknown);

  CHECK(table.size() == 3);
  CHECK(table.Find(v1->backends[2].state_key()) == nullptr);
  CHECK(table.Find(b2.state_key()) == s2[1]);
  // The removed backend is out of the table but alive while held (in flight).
  CHECK_FALSE(removed.expired());
  s1.clear();
  CHECK(removed.expired());
}
