#include "tracing/span_batcher.h"

#include <catch2/catch.hpp>

#include "testing/simulated_time.h"

namespace geogate::tracing {
namespace {

using health::Millis;

Span Named(int i) {
  Span s;
  s.name = std::to_string(i);
  return s;
}

TEST_CASE("a batch is due when batch_size spans wait") {
  health::SimulatedTime time;
  SpanBatcher b({.batch_size = 3, .batch_interval = Millis(1000), .queue_limit = 10});
  b.Add(Named(0), time.monotonic());
  b.Add(Named(1), time.monotonic());
  CHECK(b.TakeReady(time.monotonic()).empty());
  b.Add(Named(2), time.monotonic());
  b.Add(Named(3), time.monotonic());
  std::vector<Span> batch = b.TakeReady(time.monotonic());
  REQUIRE(batch.size() == 3);
  CHECK(batch[0].name == "0");  // oldest first
  CHECK(batch[2].name == "2");
  CHECK(b.queued() == 1);
}

TEST_CASE("a partial batch is due once its oldest span waited batch_interval") {
  health::SimulatedTime time;
  SpanBatcher b({.batch_size = 100, .batch_interval = Millis(1000), .queue_limit = 1000});
  CHECK(b.TakeReady(time.monotonic()).empty());  // nothing queued
  b.Add(Named(0), time.monotonic());
  time.advance(Millis(600));
  b.Add(Named(1), time.monotonic());
  time.advance(Millis(399));
  CHECK(b.TakeReady(time.monotonic()).empty());
  time.advance(Millis(1));
  CHECK(b.TakeReady(time.monotonic()).size() == 2);
  // The interval restarts with the next span.
  time.advance(Millis(5000));
  b.Add(Named(2), time.monotonic());
  CHECK(b.TakeReady(time.monotonic()).empty());
  time.advance(Millis(1000));
  CHECK(b.TakeReady(time.monotonic()).size() == 1);
}

TEST_CASE("a full queue drops new spans and counts them") {
  health::SimulatedTime time;
  SpanBatcher b({.batch_size = 2, .batch_interval = Millis(1000), .queue_limit = 3});
  for (int i = 0; i < 5; ++i)
    CHECK(b.Add(Named(i), time.monotonic()) == (i < 3));
  CHECK(b.queued() == 3);
  CHECK(b.dropped_queue_full() == 2);
  // The oldest are kept: what was queued first is exported first.
  std::vector<Span> batch = b.TakeReady(time.monotonic());
  REQUIRE(batch.size() == 2);
  CHECK(batch[0].name == "0");
  CHECK(b.Add(Named(9), time.monotonic()));
  CHECK(b.queued() == 2);
}

TEST_CASE("a backlog drains batch after batch without waiting again") {
  health::SimulatedTime time;
  SpanBatcher b({.batch_size = 2, .batch_interval = Millis(100), .queue_limit = 10});
  for (int i = 0; i < 5; ++i)
    b.Add(Named(i), time.monotonic());
  CHECK(b.TakeReady(time.monotonic()).size() == 2);
  CHECK(b.TakeReady(time.monotonic()).size() == 2);
  CHECK(b.TakeReady(time.monotonic()).empty());  // one left, younger than the interval
  time.advance(Millis(100));
  CHECK(b.TakeReady(time.monotonic()).size() == 1);
}

TEST_CASE("a smaller limit on reload keeps what is queued and refuses more") {
  health::SimulatedTime time;
  SpanBatcher b({.batch_size = 10, .batch_interval = Millis(100), .queue_limit = 10});
  for (int i = 0; i < 6; ++i)
    b.Add(Named(i), time.monotonic());
  b.Configure({.batch_size = 2, .batch_interval = Millis(100), .queue_limit = 4});
  CHECK_FALSE(b.Add(Named(6), time.monotonic()));
  CHECK(b.queued() == 6);
  CHECK(b.TakeAny().size() == 2);
}

TEST_CASE("export outcomes are counted") {
  SpanBatcher b({});
  b.CountExported(5);
  b.CountExportFailed(3);
  CHECK(b.exported() == 5);
  CHECK(b.dropped_export_failed() == 3);
}

}  // namespace
}  // namespace geogate::tracing
