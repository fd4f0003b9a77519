// The upstream pool's sweep against the worker's current config, over
// in-memory connections (no sockets): what a reload that lowers a
// backend's limit, or removes the backend, does to its idle connections.
#include "proxy/upstream_pool.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

#include "testing/simulated_time.h"

#include "in_memory.h"

using namespace geogate;
using namespace geogate::proxy;
using namespace geogate::proxy::testing;
namespace test = boost::beast::test;
using health::Millis;

namespace {

struct PoolFixture {
  net::io_context ioc;
  health::SimulatedTime sim;
  UpstreamPool pool{ioc, sim, sim};

  ~PoolFixture() { pool.Clear(); }

  /// Puts `n` connections to `backend` into the pool, idle since now, the
  /// pool keeping up to `max_idle` of them.
  void ReleaseTo(const config::Backend& backend, int n, uint32_t max_idle = 64) {
    for (int i = 0; i < n; ++i) {
      auto conn = std::make_unique<UpstreamConn>(Stream(test::stream(ioc)));
      conn->key = backend.state_key();
      pool.Release(std::move(conn), sim.monotonic(), max_idle);
    }
  }
};

}  // namespace

TEST_CASE("upstream pool: a sweep closes idle connections past pool_idle_timeout_ms",
          "[upstream_pool]") {
  PoolFixture f;
  config::SnapshotConstPtr cfg = TwoBackends("[gateway.upstream]\npool_idle_timeout_ms = 1000\n");
  f.ReleaseTo(cfg->backends[0], 3);
  f.sim.advance(Millis(1000));
  f.pool.Sweep(f.sim.monotonic(), *cfg);
  CHECK(f.pool.idle_count() == 3);  // not older than the timeout yet
  f.sim.advance(Millis(1));
  f.pool.Sweep(f.sim.monotonic(), *cfg);
  CHECK(f.pool.idle_count() == 0);
}

TEST_CASE("upstream pool: a sweep trims each backend to a lowered pool_max_idle at once",
          "[upstream_pool]") {
  PoolFixture f;
  config::SnapshotConstPtr before = TwoBackends();  // capacity 64: pool_max_idle 64
  f.ReleaseTo(before->backends[0], 5);
  f.ReleaseTo(before->backends[1], 2);
  f.pool.Sweep(f.sim.monotonic(), *before);
  CHECK(f.pool.idle_count() == 7);

  // A reload lowers the limit to 2: the oldest go, the newest stay.
  config::SnapshotConstPtr after = TwoBackends("[gateway.upstream]\npool_max_idle = 2\n");
  f.pool.Sweep(f.sim.monotonic(), *after);
  CHECK(f.pool.idle_count() == 4);
  CHECK(f.pool.TakeIdle(after->backends[0], f.sim.monotonic(), Millis(30000)) != nullptr);
  CHECK(f.pool.TakeIdle(after->backends[0], f.sim.monotonic(), Millis(30000)) != nullptr);
  CHECK(f.pool.TakeIdle(after->backends[0], f.sim.monotonic(), Millis(30000)) == nullptr);

  config::SnapshotConstPtr none = TwoBackends("[gateway.upstream]\npool_max_idle = 0\n");
  f.pool.Sweep(f.sim.monotonic(), *none);
  CHECK(f.pool.idle_count() == 0);
}

TEST_CASE("upstream pool: a sweep closes the idle connections of a backend the config dropped",
          "[upstream_pool]") {
  PoolFixture f;
  config::SnapshotConstPtr before = TwoBackends();
  f.ReleaseTo(before->backends[0], 2);
  f.ReleaseTo(before->backends[1], 3);

  // b1 gone; b0 kept under its name but at another URL: a new backend too
  // (its state key), so its old connections go as well.
  std::string text = TwoBackendsText();
  const size_t b1 = text.find("[[backends]]\nname = \"b1\"");
  REQUIRE(b1 != std::string::npos);
  text.erase(b1, text.find("[[residency]]") - b1);
  config::SnapshotConstPtr only_b0 = LoadConfigText(text);
  REQUIRE(only_b0->backends.size() == 1);
  f.pool.Sweep(f.sim.monotonic(), *only_b0);
  CHECK(f.pool.idle_count() == 2);
  CHECK(f.pool.TakeIdle(only_b0->backends[0], f.sim.monotonic(), Millis(30000)) != nullptr);

  std::string moved = text;
  moved.replace(moved.find("127.0.0.1:1000"), 14, "127.0.0.1:2000");
  f.pool.Sweep(f.sim.monotonic(), *LoadConfigText(moved));
  CHECK(f.pool.idle_count() == 0);
}
