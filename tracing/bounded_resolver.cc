#include "tracing/bounded_resolver.h"

#include <mutex>
#include <system_error>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace geogate::tracing {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

// What a lookup's thread and the waiting coroutine share. `mu` guards the
// fields the thread writes (done, ec, endpoints, abandoned); `timer` and
// `cancelled` belong to the executor's thread alone.
struct BoundedResolver::Pending {
  std::mutex mu;
  bool done = false;
  bool abandoned = false;  // the executor may be gone: the thread posts nothing
  error_code ec;
  Endpoints endpoints;
  net::steady_timer* timer = nullptr;  // the waiter's, while it waits
  bool cancelled = false;
};

BoundedResolver::BoundedResolver(net::any_io_executor executor, LookupFn lookup)
    : executor_(std::move(executor)),
      lookup_(lookup ? std::move(lookup) : LookupFn(SystemLookup)) {}

BoundedResolver::~BoundedResolver() {
  Abandon();
}

error_code BoundedResolver::SystemLookup(const std::string& host, uint16_t port, Endpoints& out) {
  net::io_context ioc(1);
  tcp::resolver resolver(ioc);
  error_code ec;
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return ec;
  for (const auto& r : results)
    out.push_back(r.endpoint());
  if (out.empty()) return net::error::host_not_found;
  return {};
}

void BoundedResolver::Cancel() {
  if (running_ && running_->timer != nullptr) {
    running_->cancelled = true;
    running_->timer->cancel();
  }
}

void BoundedResolver::Abandon() {
  abandoned_ = true;
  if (!running_) return;
  Cancel();
  std::lock_guard lock(running_->mu);
  running_->abandoned = true;
}

net::awaitable<std::pair<error_code, BoundedResolver::Endpoints>> BoundedResolver::Resolve(
    std::string host, uint16_t port, std::chrono::milliseconds timeout) {
  using Result = std::pair<error_code, Endpoints>;
  if (abandoned_) co_return Result{net::error::operation_aborted, {}};
  if (running_) {
    std::lock_guard lock(running_->mu);
    // An earlier lookup timed out and is still stuck: no second thread.
    if (!running_->done) co_return Result{net::error::try_again, {}};
  }
  auto pending = std::make_shared<Pending>();
  running_ = pending;
  net::steady_timer timer(executor_);
  timer.expires_after(timeout);
  pending->timer = &timer;
  try {
    std::thread([pending, lookup = lookup_, host, port, ex = executor_]() {
      Endpoints endpoints;
      error_code ec = lookup(host, port, endpoints);
      std::lock_guard lock(pending->mu);
      pending->done = true;
      pending->ec = ec;
      pending->endpoints = std::move(endpoints);
      // Wakes the waiter early. Under the lock, so Abandon() (which takes it
      // before the io_context can go) is either before this or after it.
      if (!pending->abandoned)
        net::post(ex, [pending] {
          if (pending->timer != nullptr) pending->timer->cancel();
        });
    }).detach();
  } catch (const std::system_error& e) {
    pending->timer = nullptr;
    running_.reset();
    co_return Result{e.code(), {}};
  }
  // Clears the pointer to the timer however the wait ends (also when the
  // coroutine is destroyed without resuming).
  struct ClearTimer {
    Pending* p;
    ~ClearTimer() { p->timer = nullptr; }
  } clear{pending.get()};
  co_await timer.async_wait(net::as_tuple(net::use_awaitable));
  if (pending->cancelled || abandoned_) co_return Result{net::error::operation_aborted, {}};
  std::lock_guard lock(pending->mu);
  if (!pending->done) co_return Result{net::error::timed_out, {}};
  if (running_ == pending) running_.reset();
  co_return Result{pending->ec, std::move(pending->endpoints)};
}

}  // namespace geogate::tracing
