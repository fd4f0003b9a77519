#include "health/health_tracker.h"

#include <catch2/catch.hpp>

using geogate::health::HealthState;
using geogate::health::HealthTracker;
using geogate::health::Transition;

TEST_CASE("tracker: the first result decides at once", "[health][tracker]") {
  SECTION("first success -> healthy") {
    HealthTracker t(3, 3);
    CHECK(t.state() == HealthState::kUnknown);
    CHECK(t.observe(true) == Transition::kChanged);
    CHECK(t.state() == HealthState::kHealthy);
  }
  SECTION("first failure -> unhealthy") {
    HealthTracker t(3, 3);
    CHECK(t.observe(false) == Transition::kChanged);
    CHECK(t.state() == HealthState::kUnhealthy);
  }
}

TEST_CASE("tracker: unhealthy_threshold failures to go down", "[health][tracker]") {
  HealthTracker t(2, 3);
  t.observe(true);
  CHECK(t.observe(false) == Transition::kChangePending);
  CHECK(t.changing());
  CHECK(t.observe(false) == Transition::kChangePending);
  CHECK(t.state() == HealthState::kHealthy);
  CHECK(t.observe(false) == Transition::kChanged);
  CHECK(t.state() == HealthState::kUnhealthy);
  CHECK_FALSE(t.changing());
}

TEST_CASE("tracker: a good result breaks a streak of failures", "[health][tracker]") {
  HealthTracker t(2, 2);
  t.observe(true);
  CHECK(t.observe(false) == Transition::kChangePending);
  CHECK(t.observe(true) == Transition::kUnchanged);
  CHECK_FALSE(t.changing());
  CHECK(t.observe(false) == Transition::kChangePending);
  CHECK(t.state() == HealthState::kHealthy);
}

TEST_CASE("tracker: healthy_threshold successes to return", "[health][tracker]") {
  HealthTracker t(3, 1);
  t.observe(false);
  CHECK(t.observe(true) == Transition::kChangePending);
  CHECK(t.observe(true) == Transition::kChangePending);
  CHECK(t.state() == HealthState::kUnhealthy);
  CHECK(t.observe(true) == Transition::kChanged);
  CHECK(t.state() == HealthState::kHealthy);
  CHECK(t.observe(true) == Transition::kUnchanged);
}

TEST_CASE("tracker: a failure restarts the way back", "[health][tracker]") {
  HealthTracker t(2, 2);
  t.observe(false);
  CHECK(t.observe(true) == Transition::kChangePending);
  CHECK(t.observe(false) == Transition::kUnchanged);
  CHECK(t.observe(true) == Transition::kChangePending);
  CHECK(t.observe(true) == Transition::kChanged);
}

TEST_CASE("tracker: a hard failure takes a healthy backend down at once", "[health][tracker]") {
  HealthTracker t(2, 5);
  t.observe(true);
  CHECK(t.HardFailure() == Transition::kChanged);
  CHECK(t.state() == HealthState::kUnhealthy);
  // ... and it needs the full healthy_threshold to come back.
  CHECK(t.observe(true) == Transition::kChangePending);
  CHECK(t.HardFailure() == Transition::kUnchanged);  // restarts the count
  CHECK(t.observe(true) == Transition::kChangePending);
  CHECK(t.observe(true) == Transition::kChanged);
}

TEST_CASE("tracker: a hard failure of an unknown backend is a verdict", "[health][tracker]") {
  HealthTracker t(2, 2);
  CHECK(t.HardFailure() == Transition::kChanged);
  CHECK(t.state() == HealthState::kUnhealthy);
}

TEST_CASE("tracker: thresholds of 0 behave as 1 and a reload keeps the verdict",
          "[health][tracker]") {
  HealthTracker t(0, 0);
  t.observe(true);
  CHECK(t.observe(false) == Transition::kChanged);
  t.SetThresholds(4, 4);
  CHECK(t.state() == HealthState::kUnhealthy);
  CHECK(t.healthy_threshold() == 4);
  for (int i = 0; i < 3; ++i)
    CHECK(t.observe(true) == Transition::kChangePending);
  CHECK(t.observe(true) == Transition::kChanged);
}
