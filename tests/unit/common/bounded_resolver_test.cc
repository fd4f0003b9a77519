// BoundedResolver: a lookup that answers, one that hangs (the caller gets
// timed_out; no second thread starts while it hangs; a later lookup works
// once it returned), and Cancel(). The lookups are injected: no DNS, no
// sockets.
#include "common/bounded_resolver.h"

#include <catch2/catch.hpp>

#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "testing/held_lookup.h"

namespace geogate::common {
namespace {

namespace net = boost::asio;
using boost::system::error_code;
using Endpoints = BoundedResolver::Endpoints;
using namespace std::chrono_literals;

BoundedResolver::LookupFn Held(std::shared_ptr<LookupGate> gate) {
  return HeldLookup(std::move(gate), net::ip::make_address("192.0.2.7"));
}

// Runs one Resolve to its end on `ioc`.
std::pair<error_code, Endpoints> RunResolve(net::io_context& ioc, BoundedResolver& r,
                                            std::chrono::milliseconds timeout) {
  std::pair<error_code, Endpoints> out;
  bool finished = false;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        out = co_await r.Resolve("collector.example", 4318, timeout);
        finished = true;
      },
      net::detached);
  ioc.restart();
  ioc.run();
  REQUIRE(finished);
  return out;
}

TEST_CASE("a lookup that answers in time gives its addresses", "[common][resolver]") {
  net::io_context ioc;
  auto gate = std::make_shared<LookupGate>(false);
  gate->Open();
  BoundedResolver r(ioc.get_executor(), Held(gate));
  auto [ec, eps] = RunResolve(ioc, r, 10s);
  CHECK_FALSE(ec);
  REQUIRE(eps.size() == 1);
  CHECK(eps[0].address().to_string() == "192.0.2.7");
  CHECK(eps[0].port() == 4318);
}

TEST_CASE("a hanging lookup times out, and starts no second thread", "[common][resolver]") {
  net::io_context ioc;
  auto gate = std::make_shared<LookupGate>(false);
  BoundedResolver r(ioc.get_executor(), Held(gate));
  auto first = RunResolve(ioc, r, 20ms);
  CHECK(first.first == net::error::timed_out);
  // Still hanging: refused at once, no new lookup.
  auto second = RunResolve(ioc, r, 10s);
  CHECK(second.first == net::error::try_again);
  CHECK(gate->Started() == 1);
  // Once the stuck lookup returned, a new one runs and answers.
  gate->Open();
  for (int i = 0; i < 200; ++i) {  // bounded: the detached thread finishes
    auto third = RunResolve(ioc, r, 10s);
    if (third.first == net::error::try_again) {
      std::this_thread::sleep_for(5ms);
      continue;
    }
    CHECK_FALSE(third.first);
    CHECK(third.second.size() == 1);
    break;
  }
  CHECK(gate->Started() == 2);
}

TEST_CASE("Cancel ends a waiting lookup, Abandon every later one", "[common][resolver]") {
  net::io_context ioc;
  auto gate = std::make_shared<LookupGate>(false);
  BoundedResolver r(ioc.get_executor(), Held(gate));
  std::pair<error_code, Endpoints> out;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> { out = co_await r.Resolve("collector.example", 80, 10s); },
      net::detached);
  // Cancel once the lookup waits.
  net::steady_timer later_on(ioc, 20ms);
  later_on.async_wait([&](error_code) { r.Cancel(); });
  ioc.run();
  CHECK(out.first == net::error::operation_aborted);
  r.Abandon();
  gate->Open();
  auto later = RunResolve(ioc, r, 10s);
  CHECK(later.first == net::error::operation_aborted);
}

}  // namespace
}  // namespace geogate::common
