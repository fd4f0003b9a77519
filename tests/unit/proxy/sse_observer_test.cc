#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "proxy/sse_observer.h"

using namespace geogate::proxy;
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

TEST_CASE("OpenAI's shape: \"usage\":null in every chunk before the usage chunk", "[sse]") {
  // What api.openai.com sends when stream_options.include_usage is set.
  auto token = [](int i) {
    std::string t = Token(i);
    return t.insert(t.size() - 3, ",\"usage\":null");
  };
  REQUIRE(token(0).ends_with("}],\"usage\":null}\n\n"));
  SseObserver strip(true, false);
  CHECK(Run(strip, {token(0) + token(1), token(2) + kUsage, kDone}) ==
        token(0) + token(1) + token(2) + kDone);
  CHECK(strip.usage_seen());
  CHECK(strip.prompt_tokens() == 7);
  CHECK(strip.completion_tokens() == 3);
  CHECK(strip.content_events() == 3);
  SseObserver pass(true, true);
  CHECK(Run(pass, {token(0), token(1), kUsage, kDone}) == token(0) + token(1) + kUsage + kDone);
  CHECK(pass.completion_tokens() == 3);
  // Without the usage chunk the content events are the estimate.
  SseObserver cut(true, false);
  Run(cut, {token(0), token(1), kDone});
  CHECK(cut.estimated());
  CHECK(cut.completion_tokens() == 2);
}

TEST_CASE("an encoded body passes as it comes, unread, and ends no event", "[sse]") {
  for (bool sse : {true, false}) {
    SseObserver o(sse, false);
    o.set_encoded();
    const std::string half = Token(0).substr(0, 12);  // what gzip bytes look like to a scan
    CHECK(std::string(o.Filter(half, Clock::now())) == half);
    CHECK(std::string(o.Filter(kUsage, Clock::now())) == kUsage);  // nothing removed
    CHECK_FALSE(o.at_event_end());  // an error event now would be plain text inside it
    CHECK(o.Finish(Clock::now()).empty());
    CHECK(o.bytes_held() == 0);
    CHECK(o.content_events() == 0);
    CHECK_FALSE(o.usage_seen());
  }
}

TEST_CASE("token gaps are held in batches and handed to the sink", "[sse]") {
  auto t = SseObserver::Clock::time_point{} + std::chrono::seconds(1);
  std::vector<std::vector<double>> batches;
  SseObserver o(true, false);
  o.set_gap_sink([&](std::span<const double> g) { batches.emplace_back(g.begin(), g.end()); });
  constexpr int kEvents = 40;
  for (int i = 0; i < kEvents; ++i) {
    o.Filter(Token(i), t + std::chrono::milliseconds(3 * i));
    CHECK(o.token_gaps().size() <= SseObserver::kGapBatch);
  }
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].size() == SseObserver::kGapBatch);
  CHECK(batches[1].size() == SseObserver::kGapBatch);
  CHECK(o.token_gaps().size() == kEvents - 1 - 2 * SseObserver::kGapBatch);
  o.FlushGaps();
  CHECK(o.token_gaps().empty());
  REQUIRE(batches.size() == 3);
  size_t n = 0;
  for (const auto& b : batches)
    for (double g : b) {
      CHECK(g == Approx(0.003));
      ++n;
    }
  CHECK(n == kEvents - 1);
  o.FlushGaps();  // nothing held: nothing handed over
  CHECK(batches.size() == 3);

  // Without a sink a full batch is dropped: what is held stays bounded.
  SseObserver bare(true, false);
  for (int i = 0; i < kEvents; ++i)
    bare.Filter(Token(i), t + std::chrono::milliseconds(i));
  CHECK(bare.token_gaps().size() == kEvents - 1 - 2 * SseObserver::kGapBatch);
  CHECK(bare.content_events() == kEvents);
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

TEST_CASE("pass-through: whole events go out at once, half of one at its end", "[sse]") {
  // An SSE client acts on an event only at its end: the half waits for
  // the rest, which sends it on; nothing whole is ever held.
  for (bool client_wants_usage : {true, false}) {
    for (auto api : {SseObserver::Api::kChat, SseObserver::Api::kResponses}) {
      SseObserver o(true, client_wants_usage, api);
      std::string half = Token(1).substr(0, 10);
      CHECK(std::string(o.Filter(Token(0) + half, Clock::now())) == Token(0));
      CHECK(o.at_event_end());  // what went out ends on an event boundary
      CHECK(std::string(o.Filter(Token(1).substr(10), Clock::now())) == Token(1));
      CHECK(o.Finish(Clock::now()).empty());
    }
  }
}

TEST_CASE("an unfinished event over 1 MiB is not SSE: it goes out, and is known to", "[sse]") {
  for (bool client_wants_usage : {true, false}) {
    SseObserver o(true, client_wants_usage);
    std::string big = "data: " + std::string((1 << 20) + 1, 'x');
    CHECK(std::string(o.Filter(Token(0) + big, Clock::now())) == Token(0) + big);
    CHECK_FALSE(o.at_event_end());  // an error event now would be read as its rest
    CHECK(std::string(o.Filter("yy", Clock::now())) == "yy");
    CHECK_FALSE(o.at_event_end());
    // Its end arrives: events after it are whole again, and counted.
    CHECK(std::string(o.Filter("\n\n" + Token(1), Clock::now())) == "\n\n" + Token(1));
    CHECK(o.at_event_end());
    CHECK(o.content_events() == 2);
  }
}

TEST_CASE("without usage the content events are the (estimated) count", "[sse]") {
  SseObserver o(true, false);
  Run(o, {Token(0), Token(1), Token(2), Token(3), kDone});
  CHECK(o.estimated());
  CHECK(o.completion_tokens() == 4);
}

TEST_CASE("chat: reasoning, refusal and tool-call deltas are tokens; null members are not",
          "[sse]") {
  // What a reasoning model streams through vLLM (reasoning_content, or
  // `reasoning` in newer versions, with no content member), a refusal, a
  // tool call's arguments: each chunk carries generated tokens, as the
  // Responses API's reasoning, refusal and arguments deltas do.
  auto delta = [](std::string_view members) {
    return "data: {\"choices\":[{\"index\":0,\"delta\":{" + std::string(members) +
           "},\"finish_reason\":null}]}\n\n";
  };
  SseObserver o(true, false);
  Run(o, {delta(R"("role":"assistant","content":"")"), delta(R"("reasoning_content":"Let")"),
          delta(R"("reasoning_content":" me")"), delta(R"("reasoning":" think")"),
          delta(R"("content":null,"reasoning_content":".")"), delta(R"("content":"Hi")"),
          delta(R"("refusal":"No")"),
          delta(R"("tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}])"), kDone});
  CHECK(o.content_events() == 8);
  CHECK(o.token_gaps().size() == 7);  // one gap per token after the first, none of them merged
  // A chunk whose members are all null carries no token.
  SseObserver nulls(true, false);
  Run(nulls, {delta(R"("content":null)"), delta(R"("content": null,"refusal":null)"),
              delta(R"("reasoning_content":null,"tool_calls":null)"), kDone});
  CHECK(nulls.content_events() == 0);
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

TEST_CASE("non-SSE JSON bodies: only the top-level usage counts, from an answer that ends",
          "[sse]") {
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

  // Only the usage member is parsed (found from the end): what comes
  // before it is forwarded, not validated; the usage object itself must be.
  SseObserver rest(false, false);
  Run(rest, {R"({"choices":[1,,],"usage":{"prompt_tokens":4,"completion_tokens":9}})"});
  CHECK(rest.prompt_tokens() == 4);
  CHECK(rest.completion_tokens() == 9);
  SseObserver bad_usage(false, false);
  Run(bad_usage, {R"({"usage":{"prompt_tokens":4,"completion_tokens":}})"});
  CHECK_FALSE(bad_usage.usage_seen());
  SseObserver null_usage(false, false);
  Run(null_usage, {R"({"usage":null})"});
  CHECK_FALSE(null_usage.usage_seen());
  // Responses API answers: input and output tokens, after the output.
  SseObserver responses(false, false, SseObserver::Api::kResponses);
  Run(responses, {R"({"output":[{"content":[{"text":"\"usage\":{"}]}],)",
                  R"("usage":{"input_tokens":7,"output_tokens":3,"total_tokens":10}})"});
  CHECK(responses.prompt_tokens() == 7);
  CHECK(responses.completion_tokens() == 3);
}

TEST_CASE("non-SSE JSON bodies: a large answer's usage counts, from a bounded tail", "[sse]") {
  // An embeddings answer for a large batch runs to tens of MiB, its usage
  // last. It arrives in reads of 16 KiB; the observer keeps only a tail.
  std::string row =
      R"({"object":"embedding","index":0,"embedding":[)" + std::string(4000, '1') + "]},";
  std::string body = R"({"object":"list","data":[)";
  while (body.size() < (6u << 20))
    body += row;
  body.pop_back();  // the last row's comma
  body += R"(],"model":"embed-1","usage":{"prompt_tokens":12345,"total_tokens":12345}})";
  SseObserver o(false, false);
  std::vector<std::string> reads;
  for (size_t at = 0; at < body.size(); at += 16384)
    reads.push_back(body.substr(at, 16384));
  size_t most_held = 0;
  Clock::time_point t{};
  std::string out;
  for (const auto& r : reads) {
    out += std::string(o.Filter(r, t));
    most_held = std::max(most_held, o.bytes_held());
  }
  CHECK(o.Finish(t).empty());
  CHECK(out == body);
  CHECK(o.usage_seen());
  CHECK(o.prompt_tokens() == 12345);
  CHECK(most_held <= 2 * SseObserver::kUsageTailBytes);

  // The tail is scanned only for an answer that began as an object.
  SseObserver not_object(false, false);
  Run(not_object, {"[" + std::string(200000, ' ') + ",", R"("usage":{"prompt_tokens":4}})"});
  CHECK_FALSE(not_object.usage_seen());
  // Members after usage that outrun the tail: not found, nothing counted.
  SseObserver far(false, false);
  Run(far, {R"({"usage":{"prompt_tokens":4},"x":")" +
            std::string(2 * SseObserver::kUsageTailBytes, 'a') + "\"}"});
  CHECK_FALSE(far.usage_seen());
}

TEST_CASE("an error event from a backend is not a token", "[sse]") {
  SseObserver o(true, false);
  Run(o, {"data: {\"error\":{\"message\":\"boom\"}}\n\n"});
  CHECK(o.content_events() == 0);
}

namespace {

// A Responses API event as OpenAI frames it: `event:` then `data:`.
std::string ResponsesEvent(std::string_view type, std::string_view rest, bool event_line = true) {
  std::string e;
  if (event_line) e += "event: " + std::string(type) + "\n";
  e += "data: {\"type\":\"" + std::string(type) + "\"" + std::string(rest) + "}\n\n";
  return e;
}
// Its opening events: the Response object's "text" and "usage":null are not
// tokens or usage.
std::string ResponsesPrologue(bool event_line = true) {
  const std::string response =
      ",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"text\":{\"format\":"
      "{\"type\":\"text\"}},\"usage\":null,\"output\":[]}";
  return ResponsesEvent("response.created", response, event_line) +
         ResponsesEvent("response.in_progress", response, event_line) +
         ResponsesEvent("response.content_part.added",
                        ",\"part\":{\"type\":\"output_text\",\"text\":\"\"}", event_line);
}
std::string ResponsesDelta(int i, bool event_line = true) {
  return ResponsesEvent("response.output_text.delta",
                        ",\"item_id\":\"msg_1\",\"delta\":\"t" + std::to_string(i) + " \"",
                        event_line);
}
std::string ResponsesCompleted(bool event_line = true) {
  return ResponsesEvent("response.output_text.done", ",\"text\":\"t0 t1 t2 \"", event_line) +
         ResponsesEvent("response.completed",
                        ",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\","
                        "\"output\":[{\"content\":[{\"type\":\"output_text\",\"text\":\"t0 t1 "
                        "t2 \"}]}],\"usage\":{\"input_tokens\":11,\"input_tokens_details\":"
                        "{\"cached_tokens\":0},\"output_tokens\":3,\"total_tokens\":14}}",
                        event_line);
}

}  // namespace

TEST_CASE("Responses stream: usage from response.completed, first token at the first delta",
          "[sse]") {
  for (bool event_line : {true, false}) {
    INFO("event: lines " << event_line);
    SseObserver o(true, /*client_wants_usage=*/false, SseObserver::Api::kResponses);
    Clock::time_point t0 = Clock::time_point{} + std::chrono::seconds(1);
    std::string prologue = ResponsesPrologue(event_line);
    CHECK(o.Filter(prologue, t0) == prologue);  // untouched, not delayed
    CHECK(o.content_events() == 0);
    CHECK(o.first_content_at() == Clock::time_point{});
    std::string rest = ResponsesDelta(0, event_line) + ResponsesDelta(1, event_line);
    auto t1 = t0 + std::chrono::milliseconds(40);
    CHECK(o.Filter(rest, t1) == rest);
    CHECK(o.first_content_at() == t1);
    std::string last = ResponsesDelta(2, event_line) + ResponsesCompleted(event_line);
    CHECK(o.Filter(last, t1 + std::chrono::milliseconds(10)) == last);  // nothing stripped
    CHECK(o.Finish(t1 + std::chrono::milliseconds(11)).empty());
    CHECK(o.content_events() == 3);
    CHECK(o.usage_seen());
    CHECK(o.prompt_tokens() == 11);
    CHECK(o.completion_tokens() == 3);
    CHECK_FALSE(o.estimated());
    CHECK(o.first_content_at() == t1);
    REQUIRE(o.token_gaps().size() == 2);
    // 3 opening events, 3 deltas, output_text.done and completed: the next
    // sequence number is 8 (a mid-stream error event's).
    CHECK(o.responses_events() == 8);
  }
}

TEST_CASE("Responses stream: an event over 1 MiB still takes a sequence number", "[sse]") {
  // Its start goes out unheld once it passes 1 MiB; when its end comes, it
  // counts once, however its rest is split into lines.
  for (bool more_data_lines : {false, true}) {
    INFO("more data lines " << more_data_lines);
    SseObserver o(true, /*client_wants_usage=*/false, SseObserver::Api::kResponses);
    Clock::time_point t{};
    std::string big =
        "event: response.output_text.delta\ndata: {\"delta\":\"" + std::string((1 << 20) + 10, 'x');
    o.Filter(ResponsesDelta(0), t);
    o.Filter(big, t);
    CHECK_FALSE(o.at_event_end());
    // The blank line that ends it split from its last line's end, too.
    o.Filter(std::string(100, 'y') + (more_data_lines ? "\ndata: \"}" : "\"}") + "\n", t);
    CHECK_FALSE(o.at_event_end());
    o.Filter("\n", t);
    CHECK(o.at_event_end());
    o.Filter(ResponsesDelta(1), t);
    CHECK(o.Finish(t).empty());
    CHECK(o.responses_events() == 3);
  }
}

TEST_CASE("Responses stream: usage from response.incomplete and response.failed too", "[sse]") {
  for (const char* type : {"response.incomplete", "response.failed"}) {
    INFO(type);
    SseObserver o(true, false, SseObserver::Api::kResponses);
    std::string end = ResponsesEvent(
        type,
        ",\"response\":{\"status\":\"x\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}");
    Run(o, {ResponsesPrologue(), ResponsesDelta(0), end});
    CHECK(o.usage_seen());
    CHECK(o.prompt_tokens() == 5);
    CHECK(o.completion_tokens() == 1);
    CHECK(o.responses_events() == 5);
  }
  // Any other event with a usage member is not the end of the response.
  SseObserver o(true, false, SseObserver::Api::kResponses);
  Run(o, {ResponsesPrologue(),
          ResponsesEvent("response.output_item.done",
                         ",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":9}}")});
  CHECK_FALSE(o.usage_seen());
}

TEST_CASE("Responses stream: split at every byte, the counts are the same", "[sse]") {
  std::string all = ResponsesPrologue() + ResponsesDelta(0) + ResponsesDelta(1) +
                    ResponsesDelta(2) + ResponsesCompleted();
  for (size_t cut = 1; cut < all.size(); cut += 7) {
    SseObserver o(true, false, SseObserver::Api::kResponses);
    std::string out = Run(o, {all.substr(0, cut), all.substr(cut)});
    REQUIRE(out == all);
    CHECK(o.content_events() == 3);
    CHECK(o.prompt_tokens() == 11);
    CHECK(o.completion_tokens() == 3);
  }
}

TEST_CASE("Responses stream: without response.completed the deltas are the estimate", "[sse]") {
  SseObserver o(true, false, SseObserver::Api::kResponses);
  Run(o, {ResponsesPrologue(), ResponsesDelta(0), ResponsesDelta(1)});
  CHECK(o.estimated());
  CHECK(o.completion_tokens() == 2);
  // The chat reading of the same stream is wrong: every event with "text"
  // counts as a token and the usage is never found. This is why the API is
  // told to the observer.
  SseObserver chat(true, false);
  Run(chat, {ResponsesPrologue(), ResponsesDelta(0), ResponsesDelta(1), ResponsesCompleted()});
  CHECK(chat.completion_tokens() != 3);
}

TEST_CASE("Responses JSON body: usage.input_tokens and usage.output_tokens", "[sse]") {
  SseObserver o(false, false, SseObserver::Api::kResponses);
  std::string body =
      R"({"id":"resp_1","object":"response","output":[{"content":[{"type":"output_text",)"
      R"("text":"hi"}]}],"usage":{"input_tokens":5,"output_tokens":8,"total_tokens":13}})";
  CHECK(Run(o, {body.substr(0, 30), body.substr(30)}) == body);
  CHECK(o.prompt_tokens() == 5);
  CHECK(o.completion_tokens() == 8);
  CHECK_FALSE(o.estimated());
}

TEST_CASE("stripping: the last Filter's bytes stay valid beside what Finish returns", "[sse]") {
  // The relay writes both in one write: Finish must not reuse the buffer
  // the kept events were copied into when the usage chunk was dropped.
  SseObserver o(true, false);
  std::string_view kept = o.Filter(Token(0) + kUsage + "data: [DONE]", Clock::time_point{});
  std::string_view rest = o.Finish(Clock::time_point{} + std::chrono::milliseconds(1));
  CHECK(std::string(kept) == Token(0));
  CHECK(std::string(rest) == "data: [DONE]");
  CHECK(o.usage_seen());
}
