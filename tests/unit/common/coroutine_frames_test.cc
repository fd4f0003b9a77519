#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdlib>
#include <new>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/await.h"

// Coroutine frames come from operator new at their own size, not from
// Asio's per-thread recycling cache (BOOST_ASIO_DISABLE_AWAITABLE_FRAME_
// RECYCLING, top-level CMakeLists.txt). That cache is first fit: an open
// stream's small frame could hold a cached block of up to 1 KiB, which cost
// 1.3-1.6 KiB per open stream (bench/RESULTS.md, "Coroutine frames from
// malloc"). Without the definition, the frames below come from the cache
// and operator new sees none of them (checked: the count is 0).
//
// This binary's global operator new counts the calls its test thread makes
// while `counting` is set; otherwise it is malloc, as the default one is.
// Every unaligned form is replaced, so that under AddressSanitizer no block
// from its operator new reaches this free or the reverse. Not inlined: GCC
// would take the inlined pair for a mismatched new and free.

namespace {
thread_local bool counting = false;
thread_local std::size_t news = 0;

void* Allocate(std::size_t size) noexcept {
  if (counting) ++news;
  return std::malloc(size == 0 ? 1 : size);
}
}  // namespace

[[gnu::noinline]] void* operator new(std::size_t size) {
  if (void* p = Allocate(size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new[](std::size_t size) {
  if (void* p = Allocate(size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return Allocate(size);
}
[[gnu::noinline]] void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return Allocate(size);
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete[](void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace {

namespace net = boost::asio;

namespace common = geogate::common;

// Runs `ioc` and returns the operator-new calls it made.
std::size_t CountNews(net::io_context& ioc) {
  news = 0;
  counting = true;
  ioc.run();
  counting = false;
  return news;
}

net::awaitable<int> Inner(int x) {
  co_await net::post(co_await net::this_coro::executor, net::use_awaitable);
  co_return x + 1;
}

}  // namespace

TEST_CASE("coroutine frames: each frame is its own operator-new allocation", "[coroutine_frames]") {
  constexpr int kCalls = 100;
  net::io_context ioc;
  int sum = 0;
  net::co_spawn(
      ioc,
      [&sum]() -> net::awaitable<void> {
        for (int i = 0; i < kCalls; ++i)
          sum += co_await Inner(i);
      },
      net::detached);
  std::size_t calls = CountNews(ioc);
  CHECK(sum == kCalls * (kCalls + 1) / 2);
  // One frame per call of Inner at least (Asio allocates more of its own);
  // through Asio's cache, none.
  CHECK(calls >= static_cast<std::size_t>(kCalls));
}

// An operation awaited with common::kAwait (as_tuple(deferred)) runs in the
// awaiting coroutine's frame; with use_awaitable (kAwaitInFrame) each one
// is a coroutine of its own, a frame from operator new. The handlers' own
// state comes from Asio's recycling allocator, so after the first post,
// which fills its cache, the kAwait loop allocates nothing.
template <const auto& kToken>
std::size_t CountNewsAwaiting(int calls) {
  net::io_context ioc;
  int done = 0;
  net::co_spawn(
      ioc,
      [&done, calls]() -> net::awaitable<void> {
        auto executor = co_await net::this_coro::executor;
        for (int i = 0; i < calls; ++i) {
          co_await net::post(executor, kToken);
          ++done;
        }
      },
      net::detached);
  std::size_t allocated = CountNews(ioc);
  CHECK(done == calls);
  return allocated;
}

TEST_CASE("coroutine frames: an operation awaited with kAwait has none", "[coroutine_frames]") {
  constexpr int kCalls = 100;
  CHECK(CountNewsAwaiting<common::kAwait>(kCalls) < static_cast<std::size_t>(kCalls / 10));
  CHECK(CountNewsAwaiting<common::kAwaitInFrame>(kCalls) >= static_cast<std::size_t>(kCalls));
}
