// A common::LookupFn double: a name lookup that waits until the test lets
// it answer, as a name server that stalls and then recovers. Each lookup
// runs on its own thread (common::DetachedLookup), so the gate is shared
// and outlives the test's stack.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>

#include "common/detached_lookup.h"

namespace geogate::common {

/// Holds every lookup while closed; counts the lookups that started.
struct LookupGate {
  explicit LookupGate(bool open_at_start) : open(open_at_start) {}
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
  int Started() {
    std::lock_guard lock(mu);
    return started;
  }

  std::mutex mu;
  std::condition_variable cv;
  bool open;
  int started = 0;
};

/// A lookup that answers `address` (with the port asked for) once `gate`
/// is open.
inline LookupFn HeldLookup(std::shared_ptr<LookupGate> gate, boost::asio::ip::address address) {
  return [gate, address](const std::string&, uint16_t port, Endpoints& out) {
    std::unique_lock lock(gate->mu);
    ++gate->started;
    gate->cv.wait(lock, [&] { return gate->open; });
    out.emplace_back(address, port);
    return boost::system::error_code();
  };
}

}  // namespace geogate::common
