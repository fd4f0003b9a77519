// How much memory a request body holds while it arrives: what was received,
// not what the head announced (issue #18: 25 slow uploads that each
// announced 4 MB added 100 MB). Parses with the session's own parser type.
#include <string>

#include <boost/asio/buffer.hpp>
#include <catch2/catch.hpp>

#include "proxy/session.h"

using namespace geogate::proxy;
namespace asio = boost::asio;

namespace {

// Feeds bytes to a parser as a socket would: what the parser cannot take yet
// (a chunk header cut short) waits for the next bytes.
class Feeder {
 public:
  explicit Feeder(RequestParser& parser) : parser_(parser) {}
  void operator()(std::string_view bytes) {
    pending_.append(bytes);
    while (!pending_.empty() && !parser_.is_done()) {
      boost::system::error_code ec;
      size_t used = parser_.put(asio::buffer(pending_.data(), pending_.size()), ec);
      pending_.erase(0, used);
      if (ec == boost::beast::http::error::need_more) break;
      REQUIRE_FALSE(ec);
      if (used == 0) break;
    }
  }

 private:
  RequestParser& parser_;
  std::string pending_;
};

}  // namespace

TEST_CASE("a partial body holds what arrived, not its Content-Length", "[request_body]") {
  constexpr size_t kAnnounced = 4'000'000;
  RequestParser parser;
  parser.body_limit(8 << 20);
  Feeder feed(parser);
  feed("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
       std::to_string(kAnnounced) + "\r\n\r\n");
  REQUIRE(parser.is_header_done());
  std::string sent(1000, 'a');
  feed(sent);
  CHECK(parser.get().body().size() == 1000);
  CHECK(parser.get().body().capacity() <= 64 * 1024);

  // The rest, in socket-sized pieces: the body comes out whole, and never
  // holds much more than twice what it has.
  std::string piece(64 * 1024, 'b');
  while (sent.size() < kAnnounced) {
    std::string_view next(piece.data(), std::min(piece.size(), kAnnounced - sent.size()));
    feed(next);
    sent.append(next);
    CHECK(parser.get().body().capacity() <= 2 * parser.get().body().size());
  }
  REQUIRE(parser.is_done());
  CHECK(std::string_view(parser.get().body()) == sent);
}

TEST_CASE("a chunked body grows with its chunks", "[request_body]") {
  RequestParser parser;
  parser.body_limit(8 << 20);
  Feeder feed(parser);
  feed("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  std::string sent;
  std::string chunk(10'000, 'c');
  for (int i = 0; i < 30; ++i) {
    char size_line[16];
    std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk.size());
    feed(std::string(size_line) + chunk + "\r\n");
    sent += chunk;
    CHECK(parser.get().body().capacity() <= std::max<size_t>(2 * sent.size(), 16 * 1024));
  }
  feed("0\r\n\r\n");
  REQUIRE(parser.is_done());
  CHECK(std::string_view(parser.get().body()) == sent);
}

TEST_CASE("a small body is reserved once, at its announced size", "[request_body]") {
  RequestParser parser;
  Feeder feed(parser);
  feed("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n");
  const char* before = nullptr;
  std::string body(300, 'x');
  feed(std::string_view(body).substr(0, 100));
  before = parser.get().body().data();
  feed(std::string_view(body).substr(100));
  REQUIRE(parser.is_done());
  CHECK(parser.get().body().data() == before);  // no reallocation on the way
  CHECK(std::string_view(parser.get().body()) == body);
}
