// Backend host names, resolved off the worker's thread and under the
// request's deadline.
//
// A backend named by host (a Kubernetes service, a provider's endpoint) is
// looked up through getaddrinfo, which nothing can interrupt; on Asio's
// resolver a DNS server that stalls held the request for as long as the
// system resolver retried (connect_timeout_ms did not cover it), and every
// later lookup of the worker behind it. Here:
// - each lookup is a common::DetachedLookup (its own thread) and a caller
//   waits for it until its deadline, then gets timed_out;
// - one lookup per host:port at a time: callers that come while it runs
//   wait for the same answer;
// - an answer is used for kTtl; after that it is still served, at once,
//   while a new lookup runs in the background, for up to kMaxStale (so a
//   DNS outage does not take a named backend down with it);
// - after a failed lookup, callers without an answer get its error at once
//   for kRetryAfter before the next lookup starts.
// One per worker; its thread alone calls it. Time (TTLs, deadlines) is the
// injected TimeSource and TimerFactory.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include "absl/container/flat_hash_map.h"
#include "common/detached_lookup.h"
#include "health/time_source.h"

namespace geogate::proxy {

class UpstreamResolver {
 public:
  using Endpoints = common::Endpoints;
  static constexpr std::chrono::seconds kTtl{30};
  static constexpr std::chrono::minutes kMaxStale{10};
  static constexpr std::chrono::seconds kRetryAfter{1};

  /// `lookup` defaults to the system resolver (common::SystemLookup).
  UpstreamResolver(boost::asio::any_io_executor executor, const health::TimeSource& time,
                   health::TimerFactory& timers, common::LookupFn lookup = {});
  /// Abandons the lookups still running.
  ~UpstreamResolver();
  UpstreamResolver(const UpstreamResolver&) = delete;
  UpstreamResolver& operator=(const UpstreamResolver&) = delete;

  /// The addresses of host:port (an IP literal at once, without a lookup).
  /// @return timed_out when no answer came by `deadline`, the lookup's own
  ///         error, or operation_aborted after Abandon().
  boost::asio::awaitable<std::pair<boost::system::error_code, Endpoints>> Resolve(
      const std::string& host, uint16_t port, health::MonotonicTime deadline);

  /// Before the executor's io_context goes: no lookup still running calls
  /// back, waiting callers get operation_aborted, later ones too.
  void Abandon();
  /// Forgets answers older than kMaxStale that nothing waits for.
  void Sweep();
  /// Host names with an answer or a lookup (for tests and metrics).
  size_t size() const { return entries_.size(); }

 private:
  struct Waiter;
  struct Entry;
  void StartLookup(const std::shared_ptr<Entry>& entry, const std::string& host, uint16_t port);
  void Finish(Entry& entry, boost::system::error_code ec, Endpoints endpoints);

  boost::asio::any_io_executor executor_;
  const health::TimeSource& time_;
  health::TimerFactory& timers_;
  common::LookupFn lookup_;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> entries_;  // by host:port
  bool abandoned_ = false;
};

}  // namespace geogate::proxy
