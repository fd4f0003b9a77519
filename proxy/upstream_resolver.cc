#include "proxy/upstream_resolver.h"

#include <algorithm>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/await.h"

namespace geogate::proxy {

namespace net = boost::asio;
using boost::system::error_code;

// A caller waiting for a lookup: woken by its answer or by its deadline.
struct UpstreamResolver::Waiter {
  explicit Waiter(const net::any_io_executor& executor) : signal(executor) {
    signal.expires_at(net::steady_timer::time_point::max());
  }
  net::steady_timer signal;  // never expires: cancel() wakes the waiter
  bool timed_out = false;
};

struct UpstreamResolver::Entry {
  Endpoints endpoints;  // the last answer; empty before the first
  health::MonotonicTime answered_at{};
  error_code error;  // the last lookup's failure; clear after a success
  health::MonotonicTime failed_at{};
  std::shared_ptr<common::DetachedLookup> lookup;  // while one runs
  std::vector<Waiter*> waiters;
};

UpstreamResolver::UpstreamResolver(net::any_io_executor executor, const health::TimeSource& time,
                                   health::TimerFactory& timers, common::LookupFn lookup)
    : executor_(std::move(executor)),
      time_(time),
      timers_(timers),
      lookup_(lookup ? std::move(lookup) : common::LookupFn(common::SystemLookup)) {}

UpstreamResolver::~UpstreamResolver() {
  // Only the lookups: a waiter still here belongs to a coroutine frame that
  // is destroyed, never resumed.
  for (auto& [key, entry] : entries_)
    if (entry->lookup) entry->lookup->Abandon();
}

void UpstreamResolver::Abandon() {
  abandoned_ = true;
  for (auto& [key, entry] : entries_) {
    if (entry->lookup) entry->lookup->Abandon();
    entry->lookup.reset();
    for (Waiter* w : entry->waiters)
      w->signal.cancel();
  }
}

void UpstreamResolver::Sweep() {
  health::MonotonicTime now = time_.monotonic();
  absl::erase_if(entries_, [&](const auto& kv) {
    const Entry& e = *kv.second;
    if (e.lookup || !e.waiters.empty()) return false;
    if (!e.endpoints.empty()) return now - e.answered_at >= kMaxStale;
    return !e.error || now - e.failed_at >= kRetryAfter;
  });
}

void UpstreamResolver::StartLookup(const std::shared_ptr<Entry>& entry, const std::string& host,
                                   uint16_t port) {
  error_code ec;
  entry->lookup = common::DetachedLookup::Start(
      executor_, lookup_, host, port,
      // `this` outlives the callback: the destructor abandons the lookup.
      [this, weak = std::weak_ptr<Entry>(entry)](error_code lookup_ec, Endpoints endpoints) {
        if (auto e = weak.lock()) Finish(*e, lookup_ec, std::move(endpoints));
      },
      ec);
  if (!entry->lookup) {  // no thread: a failed lookup
    entry->error = ec;
    entry->failed_at = time_.monotonic();
  }
}

void UpstreamResolver::Finish(Entry& e, error_code ec, Endpoints endpoints) {
  e.lookup.reset();
  if (!ec && !endpoints.empty()) {
    e.endpoints = std::move(endpoints);
    e.answered_at = time_.monotonic();
    e.error.clear();
  } else {
    // A failure keeps the last answer: it is served until kMaxStale.
    e.error = ec ? ec : error_code(net::error::host_not_found);
    e.failed_at = time_.monotonic();
  }
  for (Waiter* w : e.waiters)
    w->signal.cancel();
}

net::awaitable<std::pair<error_code, UpstreamResolver::Endpoints>> UpstreamResolver::Resolve(
    const std::string& host, uint16_t port, health::MonotonicTime deadline) {
  using Result = std::pair<error_code, Endpoints>;
  error_code parse_ec;
  net::ip::address literal = net::ip::make_address(host, parse_ec);
  if (!parse_ec) co_return Result{{}, Endpoints{net::ip::tcp::endpoint(literal, port)}};
  if (abandoned_) co_return Result{net::error::operation_aborted, {}};

  std::shared_ptr<Entry>& slot = entries_[host + ":" + std::to_string(port)];
  if (!slot) slot = std::make_shared<Entry>();
  std::shared_ptr<Entry> e = slot;  // stays while this call waits, even if swept
  health::MonotonicTime now = time_.monotonic();
  bool answered = !e->endpoints.empty();
  if (answered && now - e->answered_at < kTtl) co_return Result{{}, e->endpoints};
  bool may_start = !e->lookup && !(e->error && now - e->failed_at < kRetryAfter);
  if (answered && now - e->answered_at < kMaxStale) {
    // Stale: served at once while a new lookup runs in the background.
    if (may_start) StartLookup(e, host, port);
    co_return Result{{}, e->endpoints};
  }
  if (may_start) StartLookup(e, host, port);
  if (!e->lookup) co_return Result{e->error, {}};  // failed just now: no new lookup yet
  if (now >= deadline) co_return Result{net::error::timed_out, {}};

  Waiter w(executor_);
  e->waiters.push_back(&w);
  struct Unlist {  // however the wait ends, the frame's destruction included
    Entry* e;
    Waiter* w;
    ~Unlist() { std::erase(e->waiters, w); }
  } unlist{e.get(), &w};
  health::TimerPtr timer = timers_.create([&w] {
    w.timed_out = true;
    w.signal.cancel();
  });
  timer->enable(std::chrono::ceil<health::Millis>(deadline - now));
  co_await w.signal.async_wait(common::kAwait);
  if (abandoned_) co_return Result{net::error::operation_aborted, {}};
  if (!e->endpoints.empty() && time_.monotonic() - e->answered_at < kMaxStale)
    co_return Result{{}, e->endpoints};
  if (w.timed_out || e->lookup) co_return Result{net::error::timed_out, {}};
  co_return Result{e->error, {}};
}

}  // namespace geogate::proxy
