// The one writer of a relayed response to the client: framing, the end of
// the body and the byte counts, over an in-memory client stream in
// simulated time.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

#include "proxy/client_writer.h"
#include "testing/simulated_time.h"

using namespace geogate;
using namespace geogate::proxy;
namespace test = boost::beast::test;

namespace {

struct WriterFixture {
  /// @param failing the client socket's operation that fails, and every
  ///        one after it (1: the first; never by default).
  explicit WriterFixture(size_t failing = SIZE_MAX) : fails(failing) {
    test::stream local(ioc, fails);
    local.connect(client);
    stream.emplace(std::move(local));
    writer.emplace(*stream, wd, sim, health::Millis(1000), request_bytes, worker_bytes);
  }
  /// Runs `op` to completion. @return its result.
  bool Run(net::awaitable<bool> op) {
    std::optional<bool> result;
    net::co_spawn(ioc, std::move(op), [&](std::exception_ptr e, bool ok) {
      if (e) std::rethrow_exception(e);
      result = ok;
    });
    ioc.restart();
    ioc.run();
    REQUIRE(result.has_value());
    return *result;
  }
  /// Writes like the proxy call: at once, else the rest asynchronously.
  bool Write(std::string_view head, std::string_view data) {
    if (writer->TryWrite(head, data)) return true;
    return Run(writer->Flush());
  }

  health::SimulatedTime sim;
  test::fail_count fails;
  net::io_context ioc;
  test::stream client{ioc};
  std::optional<Stream> stream;
  Watchdog wd{sim, sim};
  uint64_t request_bytes = 0;
  uint64_t worker_bytes = 0;
  std::optional<ClientWriter> writer;
};

constexpr std::string_view kHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

}  // namespace

TEST_CASE("client writer: chunked framing, the head with the first chunk", "[client_writer]") {
  WriterFixture f;
  f.writer->set_chunked(true);
  REQUIRE(f.Write(kHead, "data: a\n\n"));
  REQUIRE(f.Write({}, std::string(300, 'x')));
  REQUIRE(f.Write({}, ""));  // nothing: no empty chunk (it would end the body)
  REQUIRE(f.Run(f.writer->End("")));
  std::string expected = std::string(kHead) + "9\r\ndata: a\n\n\r\n" + "12c\r\n" +
                         std::string(300, 'x') + "\r\n" + "0\r\n\r\n";
  CHECK(f.client.str() == expected);
  CHECK(f.request_bytes == expected.size());
  CHECK(f.worker_bytes == expected.size());
}

TEST_CASE("client writer: the end carries the bytes held back, then the last chunk",
          "[client_writer]") {
  WriterFixture f;
  f.writer->set_chunked(true);
  REQUIRE(f.Write(kHead, ""));
  REQUIRE(f.Run(f.writer->End("data: [DONE]\n\n")));
  CHECK(f.client.str() == std::string(kHead) + "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n");
}

TEST_CASE("client writer: a body not chunked goes as it came, with no end", "[client_writer]") {
  WriterFixture f;
  constexpr std::string_view head = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n";
  REQUIRE(f.Write(head, "{\"answer\":"));
  REQUIRE(f.Write({}, "42}"));
  REQUIRE(f.Run(f.writer->End("")));
  CHECK(f.client.str() == std::string(head) + "{\"answer\":42}");
  CHECK(f.request_bytes == head.size() + 13);
}

TEST_CASE("client writer: a write the client's socket fails says so", "[client_writer]") {
  WriterFixture f(/*failing=*/2);
  f.writer->set_chunked(true);
  CHECK(f.Write(kHead, "data: a\n\n"));
  uint64_t counted = f.request_bytes;
  CHECK_FALSE(f.Write({}, "data: b\n\n"));
  CHECK_FALSE(f.Run(f.writer->End("")));
  CHECK(f.request_bytes == counted);  // nothing more reached the client
}

TEST_CASE("client writer: framing pieces", "[client_writer]") {
  WriterFixture f;
  std::array<net::const_buffer, 6> bufs;
  CHECK(f.writer->Frame({}, "", bufs) == 0);
  CHECK(f.writer->Frame(kHead, "", bufs) == 1);
  CHECK(f.writer->Frame(kHead, "ab", bufs) == 2);  // not chunked: head, data
  f.writer->set_chunked(true);
  CHECK(f.writer->Frame({}, "ab", bufs) == 3);  // size line, data, CRLF
  CHECK(f.writer->Frame(kHead, "ab", bufs) == 4);
  CHECK(std::string_view(static_cast<const char*>(bufs[1].data()), bufs[1].size()) == "2\r\n");
}

TEST_CASE("client writer: the last bytes and the end in one write, as TryWrite then End",
          "[client_writer]") {
  // The same body as a write of the data and End(rest); one chunk for both.
  struct Case {
    std::string_view head, data, rest, expected;
  };
  const Case cases[] = {
      {kHead, "data: a\n\n", "data: [DONE]\n\n", "17\r\ndata: a\n\ndata: [DONE]\n\n\r\n0\r\n\r\n"},
      {{}, "data: a\n\n", "", "9\r\ndata: a\n\n\r\n0\r\n\r\n"},
      {{}, "", "data: b\n\n", "9\r\ndata: b\n\n\r\n0\r\n\r\n"},
      {{}, "", "", "0\r\n\r\n"},  // no empty data chunk before the last one
      {kHead, "", "", "0\r\n\r\n"},
  };
  for (const Case& c : cases) {
    WriterFixture f;
    f.writer->set_chunked(true);
    bool done = f.writer->TryWriteLast(c.head, c.data, c.rest) || f.Run(f.writer->Flush());
    REQUIRE(done);
    std::string expected = std::string(c.head) + std::string(c.expected);
    CHECK(f.client.str() == expected);
    CHECK(f.request_bytes == expected.size());
    CHECK(f.worker_bytes == expected.size());
  }
}

TEST_CASE("client writer: the last bytes of a body not chunked go as they came, with no end",
          "[client_writer]") {
  WriterFixture f;
  constexpr std::string_view head = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n";
  bool done = f.writer->TryWriteLast(head, "{\"answer\":42}", "") || f.Run(f.writer->Flush());
  REQUIRE(done);
  CHECK(f.client.str() == std::string(head) + "{\"answer\":42}");
  CHECK(f.request_bytes == head.size() + 13);
}

TEST_CASE("client writer: a last write the client's socket fails says so", "[client_writer]") {
  WriterFixture f(/*failing=*/2);
  f.writer->set_chunked(true);
  CHECK(f.Write(kHead, "data: a\n\n"));
  uint64_t counted = f.request_bytes;
  CHECK_FALSE((f.writer->TryWriteLast({}, "data: b\n\n", "") || f.Run(f.writer->Flush())));
  CHECK_FALSE(f.writer->data_reached());  // the data was lost too, not only the end
  CHECK(f.request_bytes == counted);
}
