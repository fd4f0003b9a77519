// The admin listener (loopback by default): /healthz, /readyz, /metrics and
// /admin/* (backends, config, geo, reload, drain). Runs on the main thread's
// io_context, never on a worker.
#pragma once

#include <cstdint>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "absl/status/status.h"

namespace geogate::server {

namespace net = boost::asio;
class Server;

class AdminServer {
 public:
  AdminServer(net::io_context& ioc, Server& server) : ioc_(ioc), server_(server), acceptor_(ioc) {}
  absl::Status Start(const std::string& host, uint16_t port);
  void Stop();
  uint16_t port() const { return port_; }

 private:
  net::awaitable<void> AcceptLoop();
  net::awaitable<void> Serve(net::ip::tcp::socket socket);

  net::io_context& ioc_;
  Server& server_;
  net::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
};

}  // namespace geogate::server
