#include "health/timer_queue.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "health/asio_timer.h"
#include "testing/simulated_time.h"

using geogate::health::AsioTimerFactory;
using geogate::health::Millis;
using geogate::health::MonotonicTime;
using geogate::health::RealTimeSource;
using geogate::health::SimulatedTime;
using geogate::health::TimerPtr;
using geogate::health::TimerQueue;

namespace {

Millis Since(const SimulatedTime& time, MonotonicTime t0) {
  return std::chrono::duration_cast<Millis>(time.monotonic() - t0);
}

}  // namespace

TEST_CASE("timer queue: many timers, one base timer, deadline order", "[health][timerqueue]") {
  SimulatedTime time;
  const auto t0 = time.monotonic();
  std::vector<std::string> fired;
  std::vector<Millis> at;
  {
    TimerQueue q(time, time);
    auto record = [&](std::string name) {
      return [&, name] {
        fired.push_back(name);
        at.push_back(Since(time, t0));
      };
    };
    TimerPtr c = q.create(record("c"));
    TimerPtr a = q.create(record("a"));
    TimerPtr b = q.create(record("b"));
    TimerPtr tie = q.create(record("tie"));
    c->enable(Millis(30));
    a->enable(Millis(10));
    b->enable(Millis(20));
    tie->enable(Millis(20));  // same deadline as b, armed later: fires after b
    CHECK(q.armed() == 4);
    CHECK(time.enabled_timers() == 1);  // the queue's one base timer

    time.advance(Millis(25));
    CHECK(fired == std::vector<std::string>{"a", "b", "tie"});
    CHECK(at == std::vector<Millis>{Millis(10), Millis(20), Millis(20)});
    CHECK(c->enabled());
    CHECK_FALSE(a->enabled());
    CHECK(q.armed() == 1);
    time.advance(Millis(5));
    CHECK(fired.back() == "c");
    CHECK(at.back() == Millis(30));
    CHECK(q.armed() == 0);
    CHECK(time.enabled_timers() == 0);  // nothing armed: the base lapsed
  }
}

namespace {
// Counts the clock reads of what it is handed to.
class CountingTime final : public geogate::health::TimeSource {
 public:
  explicit CountingTime(const SimulatedTime& time) : time_(time) {}
  MonotonicTime monotonic() const override {
    ++reads;
    return time_.monotonic();
  }
  geogate::health::SystemTime system() const override { return time_.system(); }
  mutable int reads = 0;

 private:
  const SimulatedTime& time_;
};
}  // namespace

TEST_CASE("timer queue: a deadline armed with enable_at, no clock read", "[health][timerqueue]") {
  SimulatedTime time;
  CountingTime counted(time);
  const auto t0 = time.monotonic();
  std::vector<std::string> fired;
  {
    TimerQueue q(time, counted);
    TimerPtr a = q.create([&] { fired.push_back("a"); });
    TimerPtr b = q.create([&] { fired.push_back("b"); });
    a->enable_at(t0 + std::chrono::microseconds(2500), counted);
    const int first = counted.reads;  // arming the base reads the clock once
    CHECK(first == 1);
    // Later than the base's wake, and a move of an armed entry: heap only.
    b->enable_at(t0 + Millis(4), counted);
    a->enable_at(t0 + std::chrono::microseconds(3500), counted);
    CHECK(counted.reads == first);
    CHECK(time.enabled_timers() == 1);

    // Never early: not at 3 ms (a's deadline is 3.5), then both by 4.
    time.advance(Millis(3));
    CHECK(fired.empty());
    time.advance(Millis(1));
    CHECK(fired == std::vector<std::string>{"a", "b"});
  }
}

TEST_CASE("timer queue: moving a deadline, disarming the earliest", "[health][timerqueue]") {
  SimulatedTime time;
  const auto t0 = time.monotonic();
  TimerQueue q(time, time);
  std::vector<std::pair<std::string, Millis>> fired;
  auto record = [&](std::string name) {
    return [&, name] { fired.emplace_back(name, Since(time, t0)); };
  };
  TimerPtr a = q.create(record("a"));
  TimerPtr b = q.create(record("b"));
  a->enable(Millis(10));
  b->enable(Millis(50));

  SECTION("later: the base wakes at the old time, finds nothing due, sleeps on") {
    a->enable(Millis(40));
    time.advance(Millis(39));
    CHECK(fired.empty());
    time.advance(Millis(1));
    CHECK(fired == std::vector<std::pair<std::string, Millis>>{{"a", Millis(40)}});
  }
  SECTION("earlier: the base is re-armed at once") {
    b->enable(Millis(5));
    time.advance(Millis(10));
    CHECK(fired ==
          std::vector<std::pair<std::string, Millis>>{{"b", Millis(5)}, {"a", Millis(10)}});
  }
  SECTION("the earliest disarmed never fires; the next one still does") {
    a->disable();
    CHECK_FALSE(a->enabled());
    time.advance(Millis(49));
    CHECK(fired.empty());
    time.advance(Millis(1));
    CHECK(fired == std::vector<std::pair<std::string, Millis>>{{"b", Millis(50)}});
  }
  SECTION("the earliest destroyed never fires") {
    a.reset();
    CHECK(q.armed() == 1);
    time.advance(Millis(60));
    CHECK(fired == std::vector<std::pair<std::string, Millis>>{{"b", Millis(50)}});
  }
}

TEST_CASE("timer queue: callbacks that destroy and arm timers", "[health][timerqueue]") {
  SimulatedTime time;
  const auto t0 = time.monotonic();
  TimerQueue q(time, time);
  std::vector<std::pair<std::string, Millis>> fired;
  TimerPtr a, b, c, later;
  later = q.create([&] { fired.emplace_back("later", Since(time, t0)); });
  // a, due with b, destroys b (due in the same wake) and itself, and arms
  // `later` for now: it fires after the entries already due, in the same
  // advance (the base wakes again at once).
  a = q.create([&] {
    fired.emplace_back("a", Since(time, t0));
    b.reset();
    a.reset();
    later->enable(Millis(0));
  });
  b = q.create([&] { fired.emplace_back("b", Since(time, t0)); });
  c = q.create([&] { fired.emplace_back("c", Since(time, t0)); });
  a->enable(Millis(10));
  b->enable(Millis(10));
  c->enable(Millis(10));
  time.advance(Millis(20));
  CHECK(fired == std::vector<std::pair<std::string, Millis>>{
                     {"a", Millis(10)}, {"c", Millis(10)}, {"later", Millis(10)}});
  CHECK(a == nullptr);
  CHECK(b == nullptr);
  CHECK(q.armed() == 0);
}

TEST_CASE("timer queue: a periodic timer re-arming itself", "[health][timerqueue]") {
  SimulatedTime time;
  const auto t0 = time.monotonic();
  TimerQueue q(time, time);
  std::vector<Millis> ticks;
  TimerPtr periodic;
  periodic = q.create([&] {
    ticks.push_back(Since(time, t0));
    periodic->enable(Millis(10));
  });
  periodic->enable(Millis(10));
  time.advance(Millis(45));
  CHECK(ticks == std::vector<Millis>{Millis(10), Millis(20), Millis(30), Millis(40)});
  periodic.reset();
}

TEST_CASE("timer queue: after Shutdown nothing fires, timers stay usable", "[health][timerqueue]") {
  SimulatedTime time;
  TimerQueue q(time, time);
  int fired = 0;
  TimerPtr a = q.create([&] { ++fired; });
  TimerPtr b = q.create([&] { ++fired; });
  a->enable(Millis(10));
  q.Shutdown();
  CHECK(time.enabled_timers() == 0);  // the base is gone
  b->enable(Millis(5));
  CHECK(b->enabled());
  time.advance(Millis(100));
  CHECK(fired == 0);
  a->disable();
  b.reset();
  a.reset();
  CHECK(q.armed() == 0);
}

// The heap against a plain model: random arms (earlier, later, re-arms of
// armed timers, re-arms from callbacks), disarms, destroys and advances.
// Each timer that fires must be the model's earliest (deadline, then arm
// order) at that very time, and after an advance nothing due may be left.
TEST_CASE("timer queue: random operations against a model", "[health][timerqueue]") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    SimulatedTime time;
    const auto t0 = time.monotonic();
    TimerQueue q(time, time);
    constexpr int kTimers = 64;
    std::vector<TimerPtr> timers(kTimers);
    std::map<std::pair<Millis, uint64_t>, int> model;  // (deadline, arm order) -> timer
    std::vector<std::pair<Millis, uint64_t>> key(kTimers);
    std::vector<bool> in_model(kTimers, false);
    uint64_t seq = 0;
    size_t fires = 0;
    bool order_ok = true;
    auto unmodel = [&](int i) {
      if (in_model[i]) model.erase(key[i]);
      in_model[i] = false;
    };
    auto arm = [&](int i, Millis after) {
      unmodel(i);
      key[i] = {Since(time, t0) + after, ++seq};
      model[key[i]] = i;
      in_model[i] = true;
      timers[i]->enable(after);
    };
    auto make = [&](int i) {
      timers[i] = q.create([&, i] {
        ++fires;
        const bool earliest = !model.empty() && model.begin()->second == i &&
                              model.begin()->first.first == Since(time, t0);
        if (!earliest) order_ok = false;
        unmodel(i);
        if (rng() % 4 == 0) arm(i, Millis(rng() % 30));  // re-armed from its callback
      });
    };
    for (int i = 0; i < kTimers; ++i)
      make(i);
    for (int step = 0; step < 600; ++step) {
      const int i = static_cast<int>(rng() % kTimers);
      switch (rng() % 5) {
        case 0:
        case 1:
          arm(i, Millis(rng() % 100));
          break;
        case 2:
          unmodel(i);
          timers[i]->disable();
          break;
        case 3:
          unmodel(i);
          timers[i].reset();
          make(i);
          break;
        default: {
          time.advance(Millis(rng() % 40));
          REQUIRE(order_ok);
          // Nothing due is left behind.
          if (!model.empty()) REQUIRE(model.begin()->first.first > Since(time, t0));
          break;
        }
      }
      REQUIRE(q.armed() == model.size());
      for (int j = 0; j < kTimers; ++j)
        REQUIRE(timers[j]->enabled() == in_model[j]);
    }
    CHECK(fires > 100);  // the run exercised firing, not only arming
    timers.clear();
  }
}

TEST_CASE("timer queue: over an io_context's real timers", "[health][timerqueue]") {
  boost::asio::io_context io;
  RealTimeSource clock;
  AsioTimerFactory base(io);
  TimerQueue q(base, clock);
  std::vector<int> fired;
  TimerPtr slow = q.create([&] { fired.push_back(3); });
  TimerPtr fast = q.create([&] { fired.push_back(1); });
  TimerPtr gone = q.create([&] { fired.push_back(99); });
  TimerPtr mid = q.create([&] { fired.push_back(2); });
  const auto start = clock.monotonic();
  slow->enable(Millis(30));
  gone->enable(Millis(1));
  fast->enable(Millis(5));
  mid->enable(Millis(15));
  gone->disable();
  io.run_for(std::chrono::seconds(5));  // returns when no timer is left
  CHECK(fired == std::vector<int>{1, 2, 3});
  CHECK(clock.monotonic() - start >= Millis(30));
  q.Shutdown();
}
