#include "common/bounded_resolver.h"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/await.h"

namespace geogate::common {

namespace net = boost::asio;
using boost::system::error_code;

// One Resolve()'s lookup and what its answer left; the executor's thread
// alone touches it.
struct BoundedResolver::Pending {
  std::shared_ptr<common::DetachedLookup> lookup;
  bool done = false;
  error_code ec;
  Endpoints endpoints;
  net::steady_timer* timer = nullptr;  // the waiter's, while it waits
  bool cancelled = false;
};

BoundedResolver::BoundedResolver(net::any_io_executor executor, LookupFn lookup)
    : executor_(std::move(executor)),
      lookup_(lookup ? std::move(lookup) : LookupFn(common::SystemLookup)) {}

BoundedResolver::~BoundedResolver() {
  Abandon();
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
  if (running_->lookup) running_->lookup->Abandon();
}

net::awaitable<std::pair<error_code, BoundedResolver::Endpoints>> BoundedResolver::Resolve(
    std::string host, uint16_t port, std::chrono::milliseconds timeout) {
  using Result = std::pair<error_code, Endpoints>;
  if (abandoned_) co_return Result{net::error::operation_aborted, {}};
  // An earlier lookup timed out and is still stuck: no second thread.
  if (running_ && running_->lookup && !running_->lookup->finished())
    co_return Result{net::error::try_again, {}};
  auto pending = std::make_shared<Pending>();
  running_ = pending;
  net::steady_timer timer(executor_);
  timer.expires_after(timeout);
  pending->timer = &timer;
  error_code start_ec;
  pending->lookup = common::DetachedLookup::Start(
      executor_, lookup_, std::move(host), port,
      [weak = std::weak_ptr<Pending>(pending)](error_code ec, Endpoints endpoints) {
        auto p = weak.lock();
        if (!p) return;
        p->done = true;
        p->ec = ec;
        p->endpoints = std::move(endpoints);
        if (p->timer != nullptr) p->timer->cancel();  // wakes the waiter early
      },
      start_ec);
  if (!pending->lookup) {
    pending->timer = nullptr;
    running_.reset();
    co_return Result{start_ec, {}};
  }
  // Clears the pointer to the timer however the wait ends (also when the
  // coroutine is destroyed without resuming).
  struct ClearTimer {
    Pending* p;
    ~ClearTimer() { p->timer = nullptr; }
  } clear{pending.get()};
  co_await timer.async_wait(kAwait);
  if (pending->cancelled || abandoned_) co_return Result{net::error::operation_aborted, {}};
  if (!pending->done) co_return Result{net::error::timed_out, {}};
  if (running_ == pending) running_.reset();
  co_return Result{pending->ec, std::move(pending->endpoints)};
}

}  // namespace geogate::common
