// What a worker's listener gives the connections it accepts, over real
// loopback sockets (the options live in the kernel).
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "proxy/worker.h"

namespace net = boost::asio;
using net::ip::tcp;

namespace {

bool AcceptedHasNoDelay(bool prepare) {
  net::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::address_v4::loopback(), 0));
  if (prepare) REQUIRE_FALSE(geogate::proxy::PrepareListener(acceptor));
  tcp::socket client(ioc);
  client.connect(acceptor.local_endpoint());
  tcp::endpoint peer;
  tcp::socket accepted = acceptor.accept(peer);
  // The address the accept returned is the client's, as getpeername's was.
  CHECK(peer == client.local_endpoint());
  tcp::no_delay option;
  accepted.get_option(option);
  return option.value();
}

}  // namespace

TEST_CASE("listener: accepted connections inherit TCP_NODELAY from the listener", "[listener]") {
  // Sessions no longer set it per connection: a prepared listener must.
  CHECK(AcceptedHasNoDelay(true));
  // The kernel's default is off, so the line above is the listener's doing.
  CHECK_FALSE(AcceptedHasNoDelay(false));
}
