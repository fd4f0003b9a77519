#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "proxy/sse_observer.h"

using namespace geogate::gateway;
using Clock = SseObserver::Clock;

namespace {

std::string Token(int i) {
  return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t" + std::to_string(i) +
         " \"},\"finish_reason\":null}]}\n\n";
}
const std::string kUsage =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,"
    "\"total_tokens\":10}}\n\n";
const std::string kDone = "data: [DONE]\n\n";

// Feeds `chunks` one by one; returns what the client would receive.
std::string Run(SseObserver& o, const std::vector<std::string>& chunks) {
  std::string out;
  Clock::time_point t{};
  for (const auto& c : chunks) {
    t += std::chrono::milliseconds(5);
    out += std::string(o.Filter(c, t));
  }
  out += std::string(o.Finish(t + std::chrono::milliseconds(5)));
  return out;
}

}  // namespace

TEST_CASE("usage chunk the gateway asked for is stripped, and counted", "[sse]") {
  SseObserver o(/*sse=*/true, /*client_wants_usage=*/false);
  std::string out = Run(o, {Token(0), Token(1), Token(2), kUsage, kDone});
  CHECK(out == Token(0) + Token(1) + Token(2) + kDone);
  CHECK(o.usage_seen());
  CHECK_FALSE(o.estimated());
  CHECK(o.prompt_tokens() == 7);
  CHECK(o.completion_tokens() == 3);
  CHECK(o.content_events() == 3);
  REQUIRE(o.token_gaps().size() == 2);
  CHECK(o.token_gaps()[0] == Approx(0.005));
}

TEST_CASE("stripping: events around the usage chunk in one read, and in three pieces", "[sse]") {
  // Before the usage chunk the output is a view of the input; from it on, a
  // copy of the kept events. Both, and the hand-over between held and new
  // bytes, for cuts anywhere.
  std::string all = Token(0) + Token(1) + kUsage + Token(2) + kDone;
  std::string want = Token(0) + Token(1) + Token(2) + kDone;
  SseObserver one(true, false);
  CHECK(Run(one, {all}) == want);
  CHECK(one.content_events() == 3);
  for (size_t a = 1; a < all.size(); a += 3) {
    for (size_t b = a + 1; b < all.size(); b += 5) {
      SseObserver o(true, false);
      INFO("cuts at " << a << " and " << b);
      REQUIRE(Run(o, {all.substr(0, a), all.substr(a, b - a), all.substr(b)}) == want);
      REQUIRE(o.usage_seen());
    }
  }
}

TEST_CASE("usage chunk the client asked for passes untouched", "[sse]") {
  SseObserver o(true, true);
  std::string all = Token(0) + Token(1) + kUsage + kDone;
  std::string out = Run(o, {Token(0), Token(1), kUsage, kDone});
  CHECK(out == all);
  CHECK(o.completion_tokens() == 3);
}

TEST_CASE("events split across reads at every byte offset", "[sse]") {
  std::string all = Token(0) + Token(1) + kUsage + kDone;
  for (size_t cut = 1; cut < all.size(); ++cut) {
    SseObserver strip(true, false);
    std::string out = Run(strip, {all.substr(0, cut), all.substr(cut)});
    INFO("cut at " << cut);
    CHECK(out == Token(0) + Token(1) + kDone);
    CHECK(strip.completion_tokens() == 3);
    SseObserver pass(true, true);
    CHECK(Run(pass, {all.substr(0, cut), all.substr(cut)}) == all);
    CHECK(pass.prompt_tokens() == 7);
  }
}

TEST_CASE("pass-through never delays bytes: each read is forwarded as it came", "[sse]") {
  SseObserver o(true, true);
  std::string half = Token(0).substr(0, 10);
  CHECK(std::string(o.Filter(half, Clock::now())) == half);
}

TEST_CASE("without usage the content events are the (estimated) count", "[sse]") {
  SseObserver o(true, false);
  Run(o, {Token(0), Token(1), Token(2), Token(3), kDone});
  CHECK(o.estimated());
  CHECK(o.completion_tokens() == 4);
}

TEST_CASE("CRLF line endings and multi-line data are understood", "[sse]") {
  SseObserver o(true, false);
  std::string crlf = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\r\n\r\n";
  std::string usage =
      "data: {\"choices\":[],\r\ndata: "
      "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\r\n\r\n";
  std::string out = Run(o, {crlf, usage});
  CHECK(out == crlf);
  CHECK(o.usage_seen());
  CHECK(o.prompt_tokens() == 1);
}

TEST_CASE("non-SSE JSON bodies: usage read at the end, bytes untouched", "[sse]") {
  SseObserver o(false, false);
  std::string body =
      R"({"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":4,"completion_tokens":9}})";
  std::string out = Run(o, {body.substr(0, 20), body.substr(20)});
  CHECK(out == body);
  CHECK(o.prompt_tokens() == 4);
  CHECK(o.completion_tokens() == 9);
  CHECK_FALSE(o.estimated());
}

TEST_CASE("non-SSE JSON bodies: only the top-level usage counts, and only in valid JSON", "[sse]") {
  SseObserver nested(false, false);
  Run(nested, {R"({"choices":[{"usage":{"prompt_tokens":1}}],"meta":{"usage":{"prompt_tokens":2}},)"
               R"("usage":{"completion_tokens":5}})"});
  CHECK(nested.completion_tokens() == 5);
  CHECK(nested.prompt_tokens() != 1);
  CHECK(nested.prompt_tokens() != 2);

  SseObserver repeated(false, false);  // the last usage member wins, as in a document
  Run(repeated,
      {R"({"usage":{"prompt_tokens":1,"completion_tokens":2},"usage":{"prompt_tokens":3}})"});
  CHECK(repeated.prompt_tokens() == 3);
  CHECK(repeated.completion_tokens() != 2);

  SseObserver broken(false, false);  // cut short: nothing is taken from it
  Run(broken, {R"({"usage":{"prompt_tokens":4,"completion_tokens":9},"choices":[)"});
  CHECK_FALSE(broken.usage_seen());
  CHECK(broken.prompt_tokens() != 4);
}

TEST_CASE("an error event from a backend is not a token", "[sse]") {
  SseObserver o(true, false);
  Run(o, {"data: {\"error\":{\"message\":\"boom\"}}\n\n"});
  CHECK(o.content_events() == 0);
}
