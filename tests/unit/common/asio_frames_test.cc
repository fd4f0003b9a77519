#include <catch2/catch.hpp>

#include <cstddef>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/block_cache.h"

using namespace geogate::common;
namespace net = boost::asio;

// common/asio_frames.h is in effect in every build: with a Boost it was not
// checked against the build stops with an #error there, so this test never
// compiles to nothing.

namespace {

net::awaitable<int> Inner(int x) {
  co_await net::post(co_await net::this_coro::executor, net::use_awaitable);
  co_return x + 1;
}

// A frame well above the smallest class: its locals live across a
// suspension, so they are in the frame.
net::awaitable<int> Outer(int x) {
  char scratch[600] = {};
  scratch[x % 600] = static_cast<char>(x);
  int y = co_await Inner(x);
  co_return y + scratch[x % 600];
}

// Runs `n` coroutines at once on a fresh io_context on this thread.
int RunMany(int n) {
  net::io_context ioc;
  int sum = 0;
  for (int i = 0; i < n; ++i)
    net::co_spawn(
        ioc, [&sum, i]() -> net::awaitable<void> { sum += co_await Outer(i); }, net::detached);
  ioc.run();
  return sum;
}

}  // namespace

TEST_CASE("asio frames: coroutine frames come from the block cache and go back to it",
          "[block_cache][asio_frames]") {
  std::thread([] {
    REQUIRE(block_cache::CachedBlocks() == 0);  // a new thread's lists are empty
    // 64 requests in flight at once, as on a loaded worker: more frames
    // than Asio's own cache has slots.
    int sum = RunMany(64);
    CHECK(sum == 64 * 65 / 2 + 64 * 63 / 2);
    size_t cached = block_cache::CachedBlocks();
    CHECK(cached >= 3 * 64);  // each coroutine's frames, and those of its co_awaits
    // The next wave is served from those lists: nothing new is cached.
    RunMany(64);
    CHECK(block_cache::CachedBlocks() == cached);
  }).join();  // the thread's blocks are freed when it ends (LeakSanitizer checks)
}
