// The ready set (proxy/ready_set.h): a read of a drained backend socket
// waits without trying the socket, and completes as Asio's own read would.
// Over real loopback sockets (readiness is the kernel's), with bounded
// loops.
#include <poll.h>

#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include "proxy/ready_set.h"

namespace net = boost::asio;
using geogate::proxy::ReadySet;
using net::ip::tcp;

namespace {

struct Pair {
  explicit Pair(net::io_context& ioc) : client(ioc), server(ioc) {
    tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::address_v4::loopback(), 0));
    client.connect(acceptor.local_endpoint());
    server = acceptor.accept();
  }
  void Send(std::string_view bytes) { net::write(client, net::buffer(bytes)); }
  // Until the server side has bytes (or the end) to read: the test then
  // knows the kernel has queued the socket on the set's ready list.
  void AwaitReadable() {
    pollfd p{server.native_handle(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
  }
  tcp::socket client;
  tcp::socket server;
};

struct Result {
  std::optional<boost::system::error_code> ec;
  size_t n = 0;
};

auto Into(Result& r) {
  return [&r](boost::system::error_code ec, size_t n) {
    r.ec = ec;
    r.n = n;
  };
}

// Runs the io_context until `done` (at most 5 s).
template <class Done>
void RunUntil(net::io_context& ioc, Done done) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < end) {
    ioc.restart();
    ioc.run_one_for(std::chrono::milliseconds(10));
  }
  REQUIRE(done());
}

}  // namespace

TEST_CASE("ready set: a drained socket's read waits without a recv, and completes when bytes come",
          "[ready_set]") {
  net::io_context ioc;
  Pair p(ioc);
  ReadySet set(ioc);
  ReadySet::Entry e;
  REQUIRE(set.Add(e, p.server.native_handle()));
  CHECK_FALSE(e.ready());  // nothing was sent yet

  std::array<char, 64> buf;
  Result r;
  set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r));
  ioc.poll();
  CHECK_FALSE(r.ec);
  CHECK(set.counts().reads == 0);  // Asio's read would have tried, and found nothing
  CHECK(set.counts().arms == 1);

  p.Send("hello");
  RunUntil(ioc, [&] { return r.ec.has_value(); });
  CHECK_FALSE(*r.ec);
  CHECK(std::string_view(buf.data(), r.n) == "hello");
  CHECK(set.counts().reads == 1);
  CHECK(set.counts().empty_reads == 0);
  // Five bytes into 64: the socket is drained, so the next read waits too.
  CHECK_FALSE(e.ready());
  Result r2;
  set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r2));
  ioc.restart();
  ioc.poll();
  CHECK_FALSE(r2.ec);
  CHECK(set.counts().reads == 1);
  p.Send("world!");
  RunUntil(ioc, [&] { return r2.ec.has_value(); });
  CHECK(std::string_view(buf.data(), r2.n) == "world!");
  CHECK(set.counts().empty_reads == 0);
}

TEST_CASE("ready set: bytes that came before the socket was added are read", "[ready_set]") {
  net::io_context ioc;
  Pair p(ioc);
  p.Send("early");
  p.AwaitReadable();
  ReadySet set(ioc);
  ReadySet::Entry e;
  REQUIRE(set.Add(e, p.server.native_handle()));
  std::array<char, 64> buf;
  Result r;
  set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r));
  RunUntil(ioc, [&] { return r.ec.has_value(); });
  CHECK_FALSE(*r.ec);
  CHECK(std::string_view(buf.data(), r.n) == "early");
  CHECK(set.counts().empty_reads == 0);
}

TEST_CASE("ready set: a read that fills its buffer leaves the socket ready, tried at once",
          "[ready_set]") {
  net::io_context ioc;
  Pair p(ioc);
  ReadySet set(ioc);
  ReadySet::Entry e;
  REQUIRE(set.Add(e, p.server.native_handle()));
  p.Send("0123456789");
  p.AwaitReadable();
  std::array<char, 4> buf;
  Result r;
  set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r));
  RunUntil(ioc, [&] { return r.ec.has_value(); });
  CHECK(r.n == 4);
  CHECK(e.ready());  // there may be more
  uint64_t arms = set.counts().arms;
  Result r2;
  set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r2));
  CHECK_FALSE(r2.ec);  // never completes inside the call that starts it
  RunUntil(ioc, [&] { return r2.ec.has_value(); });
  CHECK(std::string_view(buf.data(), r2.n) == "4567");
  CHECK(set.counts().arms == arms);  // read at once, no wait armed
}

TEST_CASE("ready set: sockets that turn ready together are harvested by one epoll_wait",
          "[ready_set]") {
  net::io_context ioc;
  Pair a(ioc), b(ioc), c(ioc);
  ReadySet set(ioc);
  std::array<ReadySet::Entry, 3> entries;
  std::array<Pair*, 3> pairs{&a, &b, &c};
  std::array<std::array<char, 16>, 3> bufs;
  std::array<Result, 3> results;
  for (size_t i = 0; i < 3; ++i) {
    REQUIRE(set.Add(entries[i], pairs[i]->server.native_handle()));
    set.AsyncRead(entries[i], pairs[i]->server.native_handle(), net::buffer(bufs[i]),
                  Into(results[i]));
  }
  ioc.poll();
  for (Pair* p : pairs)
    p->Send("tok");
  for (Pair* p : pairs)
    p->AwaitReadable();
  RunUntil(ioc, [&] {
    return results[0].ec.has_value() && results[1].ec.has_value() && results[2].ec.has_value();
  });
  for (size_t i = 0; i < 3; ++i) {
    CHECK_FALSE(*results[i].ec);
    CHECK(std::string_view(bufs[i].data(), results[i].n) == "tok");
  }
  CHECK(set.counts().reads == 3);
  CHECK(set.counts().empty_reads == 0);
  CHECK(set.counts().arms == 1);
  CHECK(set.counts().harvests == 1);
}

TEST_CASE("ready set: the end of the stream and errors complete the read", "[ready_set]") {
  net::io_context ioc;
  Pair p(ioc);
  ReadySet set(ioc);
  ReadySet::Entry e;
  REQUIRE(set.Add(e, p.server.native_handle()));
  std::array<char, 16> buf;

  SECTION("the backend closes: eof") {
    Result r;
    set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r));
    ioc.poll();
    p.client.shutdown(tcp::socket::shutdown_send);
    RunUntil(ioc, [&] { return r.ec.has_value(); });
    CHECK(*r.ec == net::error::eof);
    CHECK(r.n == 0);
    // The end stays readable: a read after it ends the same way at once.
    Result r2;
    set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r2));
    RunUntil(ioc, [&] { return r2.ec.has_value(); });
    CHECK(*r2.ec == net::error::eof);
  }
  SECTION("a closed stream (its handle is -1): bad_descriptor") {
    Result r;
    set.AsyncRead(e, -1, net::buffer(buf), Into(r));
    RunUntil(ioc, [&] { return r.ec.has_value(); });
    CHECK(*r.ec == net::error::bad_descriptor);
  }
}

TEST_CASE("ready set: Cancel ends a waiting read with operation_aborted, not inline",
          "[ready_set]") {
  net::io_context ioc;
  Pair p(ioc);
  ReadySet set(ioc);
  ReadySet::Entry e;
  REQUIRE(set.Add(e, p.server.native_handle()));
  std::array<char, 16> buf;
  Result r;
  set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r));
  ioc.poll();
  set.Cancel(e);
  CHECK_FALSE(r.ec);  // posted, as Asio's completions are
  RunUntil(ioc, [&] { return r.ec.has_value(); });
  CHECK(*r.ec == net::error::operation_aborted);
  set.Cancel(e);  // nothing waits: nothing happens

  // The entry reads again afterwards, and the bytes were not lost.
  p.Send("after");
  Result r2;
  set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r2));
  RunUntil(ioc, [&] { return r2.ec.has_value(); });
  CHECK(std::string_view(buf.data(), r2.n) == "after");
}

TEST_CASE("ready set: Shutdown destroys waiting reads unrun; later reads are aborted",
          "[ready_set]") {
  net::io_context ioc;
  Pair p(ioc);
  ReadySet set(ioc);
  ReadySet::Entry e;
  REQUIRE(set.Add(e, p.server.native_handle()));
  std::array<char, 16> buf;
  auto sentinel = std::make_shared<int>(0);
  bool ran = false;
  set.AsyncRead(e, p.server.native_handle(), net::buffer(buf),
                [sentinel, &ran](boost::system::error_code, size_t) { ran = true; });
  ioc.poll();
  CHECK(sentinel.use_count() == 2);
  set.Shutdown();
  CHECK(sentinel.use_count() == 1);  // the handler is gone
  ioc.restart();
  ioc.poll();
  CHECK_FALSE(ran);

  Result r;
  set.AsyncRead(e, p.server.native_handle(), net::buffer(buf), Into(r));
  RunUntil(ioc, [&] { return r.ec.has_value(); });
  CHECK(*r.ec == net::error::operation_aborted);
}
