// Name resolution under a deadline, for the span exporter and the health
// probes: each lookup is
// a common::DetachedLookup (a thread of its own, abandoned when it takes too
// long, since nothing interrupts getaddrinfo); the caller waits at most
// `timeout`, and at most one lookup runs at a time: a lookup asked for while
// an earlier one is still stuck fails at once instead of piling up threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include "common/detached_lookup.h"

namespace geogate::common {

class BoundedResolver {
 public:
  using Endpoints = common::Endpoints;
  /// A blocking lookup; runs on the lookup's own thread.
  using LookupFn = common::LookupFn;

  /// `lookup` defaults to the system resolver (common::SystemLookup).
  explicit BoundedResolver(boost::asio::any_io_executor executor, LookupFn lookup = {});
  ~BoundedResolver();
  BoundedResolver(const BoundedResolver&) = delete;
  BoundedResolver& operator=(const BoundedResolver&) = delete;

  /// The addresses of host:port within `timeout` (on the executor's
  /// thread). @return timed_out when the lookup took longer (it goes on,
  /// abandoned), try_again while an earlier abandoned one still runs,
  /// operation_aborted after Cancel(), or the lookup's own error.
  boost::asio::awaitable<std::pair<boost::system::error_code, Endpoints>> Resolve(
      std::string host, uint16_t port, std::chrono::milliseconds timeout);

  /// A Resolve() waiting now returns operation_aborted at once.
  void Cancel();
  /// For good (before the executor's io_context goes away): no lookup
  /// still running touches the executor again; every later Resolve() is
  /// aborted.
  void Abandon();

 private:
  struct Pending;
  boost::asio::any_io_executor executor_;
  LookupFn lookup_;
  std::shared_ptr<Pending> running_;  // the last lookup started, until its answer is taken
  bool abandoned_ = false;
};

}  // namespace geogate::common
