// The control listener: a separate plain-HTTP port that failure modes never
// touch. Tests and benchmarks drive the simulator through it.
//
//   POST /control         {"mode","n","factor","rtt_ms","ttft_ms","token_interval_ms"} (any subset)
//   GET  /control         the current settings
//   GET  /control/stats   counters (see README.md)
//   GET  /control/requests  the heads of the last requests (--record-requests N)
//   POST /control/reset   zeroes the counters and forgets the recorded heads
#pragma once

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "bench/gpusim/options.h"

namespace gpusim {

class SimServer;

class ControlServer {
 public:
  ControlServer(boost::asio::io_context& io, SimServer& sim);
  ~ControlServer();

  /// Binds and listens; false with `error` set on failure.
  bool bind(const HostPort& where, std::string& error);
  /// "HOST:PORT" actually bound.
  std::string bound_address() const;
  /// Starts accepting on the io_context given to the constructor.
  void start();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusim
