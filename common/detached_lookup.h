// A blocking name lookup (getaddrinfo) on a thread of its own, its answer
// posted to an executor.
//
// Asio's resolver runs every lookup of an io_context on one internal thread,
// one after another, and nothing interrupts getaddrinfo: a DNS server that
// stalls holds every later lookup of that io_context (other host names too)
// for as long as the system resolver's retries take, and the io_context's
// destruction joins that thread, so it holds the process exit as well. A
// DetachedLookup that takes too long is simply abandoned: its thread ends on
// its own and posts nothing. Callers put their own deadline around it
// (BoundedResolver, the data plane's UpstreamResolver).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

namespace geogate::common {

using Endpoints = std::vector<boost::asio::ip::tcp::endpoint>;
/// A blocking lookup of host:port; runs on the lookup's own thread.
using LookupFn = std::function<boost::system::error_code(const std::string& host, uint16_t port,
                                                         Endpoints& out)>;

/// The system resolver (getaddrinfo through Asio, on the calling thread);
/// host_not_found when it gives no address.
boost::system::error_code SystemLookup(const std::string& host, uint16_t port, Endpoints& out);

class DetachedLookup : public std::enable_shared_from_this<DetachedLookup> {
 public:
  /// Runs on the executor with the lookup's answer.
  using Done = std::function<void(boost::system::error_code, Endpoints)>;

  /// Starts `lookup` of host:port on a new thread; `done` runs on
  /// `executor` with its answer unless Abandon() came first. @return null,
  /// with `ec` set, when no thread could be started.
  static std::shared_ptr<DetachedLookup> Start(boost::asio::any_io_executor executor,
                                               const LookupFn& lookup, std::string host,
                                               uint16_t port, Done done,
                                               boost::system::error_code& ec);

  /// On the executor's thread, and before the executor's io_context goes
  /// away: `done` will not run; the lookup's thread ends on its own.
  void Abandon();
  /// Whether the lookup returned (its answer may still be on its way).
  bool finished() const;

  /// Use Start().
  DetachedLookup(boost::asio::any_io_executor executor, Done done)
      : executor_(std::move(executor)), done_(std::move(done)) {}

 private:
  void Finish(boost::system::error_code ec, Endpoints endpoints);

  boost::asio::any_io_executor executor_;
  Done done_;  // the executor's thread only
  mutable std::mutex mu_;
  bool finished_ = false;   // guarded by mu_
  bool abandoned_ = false;  // guarded by mu_
};

}  // namespace geogate::common
