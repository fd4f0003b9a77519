#include "testing/simulated_time.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

using geogate::health::Millis;
using geogate::health::SimulatedTime;
using geogate::health::TimerPtr;

TEST_CASE("simulated time: timers fire in deadline order", "[health][simtime]") {
  SimulatedTime time;
  const auto t0 = time.monotonic();
  std::vector<std::string> fired;
  std::vector<Millis> at;
  auto record = [&](std::string name) {
    return [&, name] {
      fired.push_back(name);
      at.push_back(std::chrono::duration_cast<Millis>(time.monotonic() - t0));
    };
  };
  TimerPtr c = time.create(record("c"));
  TimerPtr a = time.create(record("a"));
  TimerPtr b = time.create(record("b"));
  TimerPtr tie = time.create(record("tie"));
  c->enable(Millis(30));
  a->enable(Millis(10));
  b->enable(Millis(20));
  tie->enable(Millis(20));  // same deadline as b, armed later: fires after b
  CHECK(time.enabled_timers() == 4);

  time.advance(Millis(25));
  CHECK(fired == std::vector<std::string>{"a", "b", "tie"});
  CHECK(at == std::vector<Millis>{Millis(10), Millis(20), Millis(20)});
  CHECK(time.monotonic() - t0 == Millis(25));
  CHECK(c->enabled());
  time.advance(Millis(5));
  CHECK(fired.back() == "c");
  CHECK_FALSE(c->enabled());
}

TEST_CASE("simulated time: timers armed by callbacks fire within the advance",
          "[health][simtime]") {
  SimulatedTime time;
  const auto t0 = time.monotonic();
  std::vector<Millis> ticks;
  TimerPtr periodic;
  periodic = time.create([&] {
    ticks.push_back(std::chrono::duration_cast<Millis>(time.monotonic() - t0));
    periodic->enable(Millis(10));
  });
  periodic->enable(Millis(10));
  time.advance(Millis(45));
  CHECK(ticks == std::vector<Millis>{Millis(10), Millis(20), Millis(30), Millis(40)});
}

TEST_CASE("simulated time: disable and re-arm and destroy and SetMonotonic", "[health][simtime]") {
  SimulatedTime time;
  int fired = 0;
  TimerPtr t = time.create([&] { ++fired; });
  t->enable(Millis(10));
  t->disable();
  time.advance(Millis(20));
  CHECK(fired == 0);

  t->enable(Millis(10));
  t->enable(Millis(50));  // re-arming replaces the deadline
  time.advance(Millis(20));
  CHECK(fired == 0);
  time.SetMonotonic(time.monotonic() + Millis(30));
  CHECK(fired == 1);

  // A callback may destroy its own timer.
  TimerPtr self;
  self = time.create([&] { self.reset(); });
  self->enable(Millis(1));
  time.advance(Millis(1));
  CHECK(self == nullptr);

  // The clock never goes back; system time follows monotonic time.
  const auto before = time.monotonic();
  const auto sys = time.system();
  time.SetMonotonic(before - Millis(100));
  CHECK(time.monotonic() == before);
  time.advance(Millis(1000));
  CHECK(time.system() - sys == std::chrono::seconds(1));
}

TEST_CASE("simulated time: AdvanceUntil stops when the condition holds", "[health][simtime]") {
  SimulatedTime time;
  bool flag = false;
  TimerPtr t = time.create([&] { flag = true; });
  t->enable(Millis(37));
  const auto t0 = time.monotonic();
  CHECK(time.AdvanceUntil([&] { return flag; }, Millis(100)));
  CHECK(time.monotonic() - t0 == Millis(37));
  CHECK_FALSE(time.AdvanceUntil([] { return false; }, Millis(10)));
  CHECK(time.monotonic() - t0 == Millis(47));
}
