#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/bulk_queue.h"

using namespace geogate::common;
namespace net = boost::asio;

TEST_CASE("bulk queue: handlers ready now run before the rest of a batch", "[bulk]") {
  net::io_context ioc;
  BulkQueue q(ioc, /*batch=*/2);
  std::string order;
  q.Push([&] { order += 'a'; });
  q.Push([&] { order += 'b'; });
  q.Push([&] { order += 'c'; });
  net::post(ioc, [&] { order += 'H'; });
  CHECK(q.size() == 3);
  ioc.run();
  // The first batch was scheduled before H was posted; c waits behind H.
  CHECK(order == "abHc");
  CHECK(q.size() == 0);

  // The batch follows the config on reload; it is never 0.
  q.set_batch(0);
  CHECK(q.batch() == 1);
  order.clear();
  q.Push([&] { order += 'a'; });
  q.Push([&] { order += 'b'; });
  net::post(ioc, [&] { order += 'H'; });
  ioc.restart();
  ioc.run();
  CHECK(order == "aHb");
}

TEST_CASE("bulk queue: an item queued by a running one waits for the next pass", "[bulk]") {
  net::io_context ioc;
  BulkQueue q(ioc, /*batch=*/8);
  std::string order;
  q.Push([&] {
    order += 'a';
    q.Push([&] { order += 'c'; });  // after H, though the batch had room
    net::post(ioc, [&] { order += 'H'; });
  });
  q.Push([&] { order += 'b'; });
  ioc.run();
  CHECK(order == "abHc");
}

TEST_CASE("bulk queue: handlers bound to its executor run from it", "[bulk]") {
  net::io_context ioc;
  BulkQueue q(ioc, /*batch=*/1);
  std::string order;
  net::post(net::bind_executor(q.executor(), [&] { order += 'x'; }));
  net::post(net::bind_executor(q.executor(), [&] { order += 'y'; }));
  net::post(ioc, [&] { order += 'H'; });
  CHECK(q.size() == 2);
  ioc.run();
  CHECK(order == "xHy");

  // A coroutine whose wait completes through the queue resumes from it.
  net::steady_timer timer(ioc);
  bool resumed = false;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        timer.expires_after(std::chrono::milliseconds(1));
        auto [ec] = co_await timer.async_wait(
            net::bind_executor(q.executor(), net::as_tuple(net::use_awaitable)));
        resumed = !ec;
      },
      net::detached);
  ioc.restart();
  ioc.run_for(std::chrono::seconds(5));
  CHECK(resumed);
}

TEST_CASE("bulk queue: what never ran is destroyed, not run", "[bulk]") {
  net::io_context ioc;
  auto alive = std::make_shared<int>(0);
  bool ran = false;
  {
    BulkQueue q(ioc, /*batch=*/16);
    q.Push([&ran, keep = alive] { ran = true; });
    q.Push([&ran, keep = alive] { ran = true; });
    CHECK(alive.use_count() == 3);
    q.Clear();
    CHECK(alive.use_count() == 1);
    q.Push([&ran, keep = alive] { ran = true; });
  }  // the destructor clears too
  CHECK(alive.use_count() == 1);
  CHECK_FALSE(ran);
}
