// UpstreamResolver in simulated time: the lookups are injected (held until
// the test lets them answer, on their own threads as in production), the
// deadlines are SimulatedTime's. No DNS, no sockets.
#include "proxy/upstream_resolver.h"

#include <catch2/catch.hpp>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "testing/simulated_time.h"

namespace geogate::proxy {
namespace {

namespace net = boost::asio;
using boost::system::error_code;
using Endpoints = UpstreamResolver::Endpoints;
using Result = std::pair<error_code, Endpoints>;
using namespace std::chrono_literals;

// The name server: holds every lookup until Release(); counts them; answers
// with `address`, or fails when it is empty.
struct NameServer {
  std::mutex mu;
  std::condition_variable cv;
  int released = 0;  // lookups allowed to answer
  int started = 0;
  std::string address = "192.0.2.7";

  void Release(int n = 1000) {
    std::lock_guard lock(mu);
    released += n;
    cv.notify_all();
  }
  void Answer(std::string a) {
    std::lock_guard lock(mu);
    address = std::move(a);
  }
  int Started() {
    std::lock_guard lock(mu);
    return started;
  }
  common::LookupFn Fn(std::shared_ptr<NameServer> self) {
    return [self](const std::string&, uint16_t port, Endpoints& out) {
      std::unique_lock lock(self->mu);
      int mine = self->started++;
      self->cv.wait(lock, [&] { return self->released > mine; });
      if (self->address.empty()) return error_code(net::error::host_not_found);
      out.emplace_back(net::ip::make_address(self->address), port);
      return error_code();
    };
  }
};

struct Fixture {
  Fixture() : dns(std::make_shared<NameServer>()) {}
  ~Fixture() { dns->Release(); }  // no lookup thread stays blocked

  /// Starts a Resolve of backend.test:8000 with `deadline` from now; its
  /// result lands in the returned slot.
  std::shared_ptr<std::optional<Result>> Start(health::Millis deadline,
                                               std::string host = "backend.test") {
    auto out = std::make_shared<std::optional<Result>>();
    net::co_spawn(
        ioc,
        [this, out, host, deadline]() -> net::awaitable<void> {
          *out = co_await resolver.Resolve(host, 8000, sim.monotonic() + deadline);
        },
        net::detached);
    Poll();
    return out;
  }
  /// Runs what is ready.
  void Poll() {
    ioc.restart();
    ioc.poll();
  }
  /// Runs the io_context until `done` (a lookup's thread answers on its
  /// own time); bounded.
  bool PollUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 2000 && !done(); ++i) {
      Poll();
      if (!done()) std::this_thread::sleep_for(1ms);
    }
    return done();
  }
  void Advance(health::Millis d) {
    sim.advance(d);
    Poll();
  }

  health::SimulatedTime sim;
  net::io_context ioc;
  std::shared_ptr<NameServer> dns;
  UpstreamResolver resolver{ioc.get_executor(), sim, sim, dns->Fn(dns)};
};

TEST_CASE("resolver: an IP literal needs no lookup", "[resolver]") {
  Fixture f;
  auto r = f.Start(100ms, "10.1.2.3");
  REQUIRE(r->has_value());
  CHECK_FALSE((*r)->first);
  CHECK((*r)->second.at(0).address().to_string() == "10.1.2.3");
  CHECK(f.dns->Started() == 0);
}

TEST_CASE("resolver: an answer serves for the TTL, then stale while a new lookup runs",
          "[resolver]") {
  Fixture f;
  f.dns->Release(1);
  auto first = f.Start(1000ms);
  REQUIRE(f.PollUntil([&] { return first->has_value(); }));
  CHECK_FALSE((*first)->first);
  CHECK((*first)->second.at(0).address().to_string() == "192.0.2.7");
  f.Advance(29s);
  auto cached = f.Start(1000ms);
  REQUIRE(cached->has_value());  // at once
  CHECK(f.dns->Started() == 1);
  // Past the TTL: the old answer at once, and one lookup in the background.
  f.dns->Answer("192.0.2.8");
  f.Advance(2s);
  auto stale = f.Start(1000ms);
  REQUIRE(stale->has_value());
  CHECK((*stale)->second.at(0).address().to_string() == "192.0.2.7");
  auto again = f.Start(1000ms);
  REQUIRE(again->has_value());
  CHECK(f.PollUntil([&] { return f.dns->Started() == 2; }));
  f.dns->Release(1);
  REQUIRE(f.PollUntil([&] {
    auto fresh = f.Start(1000ms);
    return fresh->has_value() && (*fresh)->second.at(0).address().to_string() == "192.0.2.8";
  }));
  CHECK(f.dns->Started() == 2);
}

TEST_CASE("resolver: a stalled lookup costs each caller its deadline, and callers share it",
          "[resolver]") {
  Fixture f;
  auto soon = f.Start(100ms);
  auto later = f.Start(300ms);
  REQUIRE(f.PollUntil([&] { return f.dns->Started() == 1; }));
  CHECK_FALSE(soon->has_value());
  CHECK_FALSE(later->has_value());
  f.Advance(100ms);
  REQUIRE(soon->has_value());
  CHECK((*soon)->first == net::error::timed_out);
  CHECK_FALSE(later->has_value());
  // The lookup answers before the second caller's deadline: it gets it.
  f.dns->Release(1);
  REQUIRE(f.PollUntil([&] { return later->has_value(); }));
  CHECK_FALSE((*later)->first);
  CHECK(f.dns->Started() == 1);  // one lookup for both
}

TEST_CASE("resolver: a caller whose deadline has passed does not wait", "[resolver]") {
  Fixture f;
  auto r = f.Start(0ms);
  REQUIRE(r->has_value());
  CHECK((*r)->first == net::error::timed_out);
}

TEST_CASE("resolver: a failed lookup keeps the last answer; without one its error holds a second",
          "[resolver]") {
  Fixture f;
  f.dns->Answer("");
  f.dns->Release(1);
  auto failed = f.Start(1000ms);
  REQUIRE(f.PollUntil([&] { return failed->has_value(); }));
  CHECK((*failed)->first == net::error::host_not_found);
  // Within kRetryAfter: the same error at once, no new lookup.
  f.Advance(500ms);
  auto quick = f.Start(1000ms);
  REQUIRE(quick->has_value());
  CHECK((*quick)->first == net::error::host_not_found);
  CHECK(f.dns->Started() == 1);
  // Then a new lookup, which answers.
  f.Advance(600ms);
  f.dns->Answer("192.0.2.9");
  f.dns->Release(1);
  auto ok = f.Start(1000ms);
  REQUIRE(f.PollUntil([&] { return ok->has_value(); }));
  CHECK_FALSE((*ok)->first);
  // Stale, and the refresh fails: the last answer still serves...
  f.dns->Answer("");
  f.Advance(31s);
  auto stale = f.Start(1000ms);
  REQUIRE(stale->has_value());
  CHECK((*stale)->second.at(0).address().to_string() == "192.0.2.9");
  f.dns->Release(1);
  REQUIRE(f.PollUntil([&] { return f.dns->Started() == 3; }));
  f.Advance(2s);
  auto still = f.Start(1000ms);
  REQUIRE(still->has_value());
  CHECK_FALSE((*still)->first);
  CHECK((*still)->second.at(0).address().to_string() == "192.0.2.9");
  // ...until kMaxStale.
  f.dns->Release(1000);
  f.Advance(UpstreamResolver::kMaxStale);
  auto gone = f.Start(1000ms);
  REQUIRE(f.PollUntil([&] { return gone->has_value(); }));
  CHECK((*gone)->first == net::error::host_not_found);
}

TEST_CASE("resolver: Abandon ends the waiting callers; the lookup's late answer goes nowhere",
          "[resolver]") {
  Fixture f;
  auto waiting = f.Start(10s);
  REQUIRE(f.PollUntil([&] { return f.dns->Started() == 1; }));
  f.resolver.Abandon();
  f.Poll();
  REQUIRE(waiting->has_value());
  CHECK((*waiting)->first == net::error::operation_aborted);
  f.dns->Release();
  for (int i = 0; i < 20; ++i) {  // the lookup's thread ends; nothing is posted
    std::this_thread::sleep_for(1ms);
    f.Poll();
  }
  auto after = f.Start(10s);
  REQUIRE(after->has_value());
  CHECK((*after)->first == net::error::operation_aborted);
}

TEST_CASE("resolver: Sweep forgets answers past kMaxStale, keeps the rest", "[resolver]") {
  Fixture f;
  f.dns->Release();
  auto a = f.Start(1000ms, "a.test");
  REQUIRE(f.PollUntil([&] { return a->has_value(); }));
  f.Advance(UpstreamResolver::kMaxStale - 1s);
  auto b = f.Start(1000ms, "b.test");
  REQUIRE(f.PollUntil([&] { return b->has_value(); }));
  f.resolver.Sweep();
  CHECK(f.resolver.size() == 2);
  f.Advance(2s);
  f.resolver.Sweep();
  CHECK(f.resolver.size() == 1);  // a.test is past kMaxStale, b.test young
  f.Advance(UpstreamResolver::kMaxStale);
  f.resolver.Sweep();
  CHECK(f.resolver.size() == 0);
}

}  // namespace
}  // namespace geogate::proxy
