// A client connection's deadlines without sockets, in simulated time: the
// real Session over one end of a Beast test stream, the test holding the
// client's end. Each deadline is the Watchdog's, on the worker's timers
// (here the simulated clock), so advancing the clock is what fires it.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

#include "proxy/session.h"
#include "proxy/worker.h"
#include "testing/simulated_time.h"

#include "in_memory.h"

using namespace geogate;
using namespace geogate::proxy;
using namespace geogate::proxy::testing;
namespace test = boost::beast::test;

namespace {

constexpr std::string_view kLimits =
    "[gateway.limits]\n"
    "header_timeout_ms = 3000\n"
    "body_timeout_ms = 4000\n"
    "idle_timeout_ms = 5000\n";

// A worker in simulated time with one client connection being served.
struct SessionFixture {
  explicit SessionFixture(ListenerSpec spec = {}) {
    shared.runtime.Publish(MakeRuntime(TwoBackends(kLimits)));
    worker.CurrentRuntime();  // adopted, as Worker::Start would
    test::stream server_end(worker.ioc());
    server_end.connect(client);
    session.emplace(worker, Stream(std::move(server_end)), routing::IpAddr::FromV4(0x7f000001),
                    spec);
    net::co_spawn(worker.ioc(), session->Run(), [this](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
      ended = true;
    });
    reader.Pump();
    RunReady();
  }
  ~SessionFixture() {
    if (!ended) {
      client.close();
      RunReady();
    }
    session.reset();
  }
  SessionFixture(const SessionFixture&) = delete;
  SessionFixture& operator=(const SessionFixture&) = delete;

  void RunReady() {
    for (int i = 0; i < 1000; ++i) {
      worker.ioc().restart();
      if (worker.ioc().poll() == 0) return;
    }
  }
  void Advance(health::Millis d) {
    sim.advance(d);
    RunReady();
  }
  void Send(std::string_view bytes) {
    net::write(client, net::buffer(bytes));
    RunReady();
  }
  const std::string& got() const { return reader.got(); }

  health::SimulatedTime sim;
  ServerShared shared;
  Worker worker{0, shared, sim, &sim};
  test::stream client{worker.ioc()};
  ClientReader reader{client};
  std::optional<Session> session;
  bool ended = false;
};

}  // namespace

TEST_CASE("session: a connection that sends nothing is closed at header_timeout_ms, silently",
          "[session]") {
  SessionFixture f;
  f.Advance(health::Millis(2999));
  CHECK_FALSE(f.reader.closed());
  f.Advance(health::Millis(1));
  CHECK(f.reader.closed());
  CHECK(f.ended);
  CHECK(f.got().empty());  // nothing was asked: nothing to answer
  CHECK(f.worker.metrics().header_timeouts == 0);
}

TEST_CASE("session: a head that does not complete within header_timeout_ms gets a 408",
          "[session]") {
  SessionFixture f;
  f.Advance(health::Millis(1000));
  f.Send("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n");  // and then nothing
  // The head's deadline runs from its first bytes.
  f.Advance(health::Millis(2999));
  CHECK_FALSE(f.reader.closed());
  CHECK(f.got().empty());
  f.Advance(health::Millis(1));
  CHECK(f.got().starts_with("HTTP/1.1 408 "));
  CHECK(f.got().find("header_timeout") != std::string::npos);
  CHECK(f.reader.closed());
  CHECK(f.worker.metrics().header_timeouts == 1);
}

TEST_CASE("session: a body that does not arrive within body_timeout_ms gets a 408", "[session]") {
  SessionFixture f;
  f.Send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
      "Content-Length: 100\r\n\r\n{\"model\":");
  f.Advance(health::Millis(3999));
  CHECK(f.got().empty());
  f.Advance(health::Millis(1));
  CHECK(f.got().starts_with("HTTP/1.1 408 "));
  CHECK(f.got().find("body_timeout") != std::string::npos);
  CHECK(f.reader.closed());
  CHECK(f.worker.metrics().body_timeouts == 1);
}

TEST_CASE("session: a kept-alive connection is closed after idle_timeout_ms, not before",
          "[session]") {
  SessionFixture f;
  f.Send("GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n");
  REQUIRE(f.got().starts_with("HTTP/1.1 200 "));
  CHECK(f.got().find("\"m\"") != std::string::npos);
  size_t answered = f.got().size();
  f.Advance(health::Millis(4999));
  CHECK_FALSE(f.reader.closed());
  // A second request on the same connection is served (and restarts the wait).
  f.Send("GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n");
  CHECK(f.got().size() == 2 * answered);
  f.Advance(health::Millis(4999));
  CHECK_FALSE(f.reader.closed());
  f.Advance(health::Millis(1));
  CHECK(f.reader.closed());
  CHECK(f.got().size() == 2 * answered);  // closed without another byte
}

TEST_CASE("session: an idle connection holds no read buffer; its next request is served whole",
          "[session]") {
  SessionFixture f;
  // Waiting for its first request: nothing but the small first-read area.
  CHECK(f.session->buffer().capacity() == 0);
  f.Send("GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n");
  REQUIRE(f.got().starts_with("HTTP/1.1 200 "));
  size_t answered = f.got().size();
  // Idle between requests: the 4 KiB buffer is back in the worker's pool.
  CHECK(f.session->buffer().capacity() == 0);
  CHECK(f.worker.read_buffers().idle() == 1);
  // A head far larger than the first read (and than a pooled buffer) still
  // arrives whole.
  std::string big =
      "GET /v1/models HTTP/1.1\r\nHost: gw\r\nX-Pad: " + std::string(6000, 'a') + "\r\n\r\n";
  f.Send(big);
  CHECK(f.got().size() == 2 * answered);
  CHECK(f.session->buffer().capacity() == 0);
  CHECK_FALSE(f.reader.closed());
}

TEST_CASE("session: the connection's address text is the peer's", "[session]") {
  SessionFixture f;
  f.Send("GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n");
  REQUIRE(f.got().starts_with("HTTP/1.1 200 "));
  CHECK(f.session->source_text() == "127.0.0.1");
}

TEST_CASE("session: behind a PROXY header, the connection's address text is its source",
          "[session]") {
  // Written once for the connection, after the PROXY header: the client
  // address of the access log and X-Forwarded-For on every request.
  auto [header, source] = GENERATE(
      std::pair<std::string_view, std::string_view>{"PROXY TCP4 192.0.2.1 10.0.0.1 5555 443\r\n",
                                                    "192.0.2.1"},
      std::pair<std::string_view, std::string_view>{"PROXY TCP6 2001:db8::7 ::1 5555 443\r\n",
                                                    "2001:db8::7"});
  SessionFixture f(ListenerSpec{.proxy_protocol = true});
  f.Send(header);
  f.Send("GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n");
  REQUIRE(f.got().starts_with("HTTP/1.1 200 "));
  CHECK(f.session->source_text() == source);
  // The same text for the connection's next request.
  f.Send("GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n");
  CHECK(f.session->source_text() == source);
  CHECK(f.session->source() == *routing::IpAddr::Parse(source));
}

TEST_CASE("session: pipelined requests in one read are all answered", "[session]") {
  SessionFixture f;
  f.Send(
      "GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n"
      "GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n"
      "GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n");
  std::string_view got = f.got();
  size_t n = 0;
  for (size_t at = got.find("HTTP/1.1 200 "); at != std::string_view::npos;
       at = got.find("HTTP/1.1 200 ", at + 1))
    ++n;
  CHECK(n == 3);
  CHECK(f.session->buffer().capacity() == 0);
  CHECK_FALSE(f.reader.closed());
}

TEST_CASE("session: an encoded request body gets a 415 that says so, and the connection serves on",
          "[session]") {
  // The gateway reads the body (model, stream, residency); it cannot read
  // a gzip one, and "not valid JSON" would send the client looking for a
  // JSON mistake.
  SessionFixture f;
  const std::string body = std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8) + "...";
  f.Send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
      "Content-Encoding: gzip\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
  CHECK(f.got().starts_with("HTTP/1.1 415 "));
  CHECK(f.got().find("\"code\":\"unsupported_content_encoding\"") != std::string::npos);
  CHECK(f.got().find("gzip") != std::string::npos);
  // identity is no coding at all, so the request goes on (to a 404 for
  // its unknown model, past the body check).
  f.Send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Encoding: identity\r\n"
      "Content-Length: 18\r\n\r\n{\"model\":\"nobody\"}");
  CHECK(f.got().find("\"code\":\"model_not_found\"") != std::string::npos);
  CHECK_FALSE(f.reader.closed());
}
