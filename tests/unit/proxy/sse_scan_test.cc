#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <string_view>

#include "proxy/sse_scan.h"

using geogate::proxy::FindSseEventKeys;
using geogate::proxy::SseEventEnd;
using geogate::proxy::SseEventKeys;

namespace {

// What the scans replace, byte by byte and with std::string_view::find.
size_t EventEndByBytes(std::string_view buf, size_t pos) {
  for (size_t i = pos; i + 1 < buf.size(); ++i) {
    if (buf[i] != '\n') continue;
    if (buf[i + 1] == '\n') return i + 2;
    if (buf[i + 1] == '\r' && i + 2 < buf.size() && buf[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

// Whether some `key` (quoted) in `d` is not followed by a null value.
bool NotNullByFind(std::string_view d, std::string_view name) {
  const std::string key = "\"" + std::string(name) + "\"";
  for (size_t at = d.find(key); at != std::string_view::npos; at = d.find(key, at + 1)) {
    size_t i = at + key.size();
    auto space = [&] {
      while (i < d.size() && std::string_view(" \t\r\n").find(d[i]) != std::string_view::npos)
        ++i;
    };
    space();
    if (i == d.size() || d[i] != ':') return true;
    ++i;
    space();
    if (d.substr(i, 4) != "null") return true;
  }
  return false;
}

SseEventKeys KeysByFind(std::string_view d) {
  auto has = [&](std::string_view s) { return d.find(s) != std::string_view::npos; };
  SseEventKeys k;
  k.usage = NotNullByFind(d, "usage");
  k.content = false;
  for (std::string_view key :
       {"content", "text", "reasoning_content", "reasoning", "refusal", "arguments"})
    k.content = k.content || NotNullByFind(d, key);
  k.empty_choices = k.usage && has("\"choices\":[]");  // looked for only beside usage
  return k;
}

// Random texts made of the pieces the scans look for, cut anywhere, so
// matches fall at every offset within and across eight-byte words and at
// both ends.
std::string RandomText(std::mt19937& rng) {
  static const char* kPieces[] = {"\"",
                                  "\"usage\"",
                                  "\"usage\":null",
                                  "\"usage\" :\n null",
                                  ":",
                                  " ",
                                  "nul",
                                  "null",
                                  "\"usage",
                                  "usage\"",
                                  "\"content\"",
                                  "\"conten",
                                  "\"content\":null",
                                  "\"reasoning_content\"",
                                  "\"reasoning\"",
                                  "\"reasoning",
                                  "\"refusal\":null",
                                  "\"refusal\"",
                                  "\"arguments\"",
                                  "\"argument",
                                  "\"re\"",
                                  "\"ar",
                                  "\"text\"",
                                  "\"tex",
                                  "\"choices\":[]",
                                  "\"choices\":[",
                                  "\"choices\":[{",
                                  "\n",
                                  "\r\n",
                                  "\n\n",
                                  "\r",
                                  "data: ",
                                  "x",
                                  "{\"id\":1}",
                                  "\"u\"",
                                  "\"c\"",
                                  "\"t\"",
                                  "\xff\x22\x80"};
  std::uniform_int_distribution<size_t> count(0, 12), pick(0, std::size(kPieces) - 1);
  std::string s;
  for (size_t n = count(rng); n > 0; --n)
    s += kPieces[pick(rng)];
  return s;
}

}  // namespace

TEST_CASE("SSE event end: the same as a byte-by-byte search", "[sse]") {
  CHECK(SseEventEnd("data: a\n\n", 0) == 9);
  CHECK(SseEventEnd("data: a\r\n\r\nb", 0) == 11);
  CHECK(SseEventEnd("data: a\n", 0) == std::string_view::npos);
  CHECK(SseEventEnd("data: a\n\r", 0) == std::string_view::npos);
  CHECK(SseEventEnd("", 0) == std::string_view::npos);
  CHECK(SseEventEnd("\n\n", 2) == std::string_view::npos);
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string s = RandomText(rng);
    for (size_t pos = 0; pos <= s.size(); ++pos) {
      INFO("text: " << s << " pos " << pos);
      REQUIRE(SseEventEnd(s, pos) == EventEndByBytes(s, pos));
      // The event's first line ends at its first '\n'.
      size_t line_end = 0;
      size_t end = SseEventEnd(s, pos, line_end);
      REQUIRE(end == EventEndByBytes(s, pos));
      REQUIRE(line_end == (end == std::string_view::npos ? end : s.find('\n', pos)));
    }
  }
}

TEST_CASE("SSE event keys: the same as searching for each text", "[sse]") {
  auto same = [](std::string_view d) {
    SseEventKeys a = FindSseEventKeys(d), b = KeysByFind(d);
    INFO("data: " << d);
    REQUIRE(a.usage == b.usage);
    REQUIRE(a.content == b.content);
    REQUIRE(a.empty_choices == b.empty_choices);
  };
  SseEventKeys k = FindSseEventKeys(R"({"choices":[{"delta":{"content":"tok"}}]})");
  CHECK((k.content && !k.usage && !k.empty_choices));
  k = FindSseEventKeys(R"({"choices":[],"usage":{"prompt_tokens":3}})");
  CHECK((!k.content && k.usage && k.empty_choices));
  k = FindSseEventKeys(R"({"choices":[{"text":"a"}]})");
  CHECK(k.content);
  // OpenAI's chunks of a stream that asked for usage: nothing to read.
  k = FindSseEventKeys(R"({"choices":[{"delta":{"content":"a"}}],"usage":null})");
  CHECK((k.content && !k.usage && !k.empty_choices));
  CHECK_FALSE(FindSseEventKeys(R"({"usage" :	null})").usage);
  // Anything else after it may be a value: a usage, or a text to parse.
  CHECK(FindSseEventKeys(R"({"usage":nul})").usage);
  CHECK(FindSseEventKeys(R"({"content":"usage"})").usage);
  CHECK(FindSseEventKeys(R"({"usage":null,"usage":{"prompt_tokens":1}})").usage);
  CHECK(FindSseEventKeys(R"({"choices":[],"usage":{"prompt_tokens":3}})").usage);
  // Generated tokens beside "content": reasoning, a refusal, tool calls.
  CHECK(FindSseEventKeys(R"({"delta":{"reasoning_content":"a"}})").content);
  CHECK(FindSseEventKeys(R"({"delta":{"reasoning":"a"}})").content);
  CHECK(FindSseEventKeys(R"({"delta":{"refusal":"a"}})").content);
  CHECK(FindSseEventKeys(R"({"delta":{"tool_calls":[{"function":{"arguments":""}}]}})").content);
  CHECK_FALSE(FindSseEventKeys(R"({"delta":{"content":null,"refusal":null}})").content);
  CHECK_FALSE(FindSseEventKeys(R"({"delta":{"role":"assistant"},"reason":"x"})").content);
  std::mt19937 rng(11);
  for (int i = 0; i < 50000; ++i) {
    std::string s = RandomText(rng);
    for (size_t from = 0; from < std::min<size_t>(s.size(), 9); ++from)
      same(std::string_view(s).substr(from));  // every alignment of the words
  }
}

TEST_CASE("SSE event keys of a stream: the same as searching each event whole", "[sse]") {
  // A stream's events start alike and then differ; sometimes the start
  // changes (the first chunk's role, the finish and usage chunks), a byte
  // of it changes, or an event is shorter than the start the scanner holds.
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> change(0, 9);
  for (int stream = 0; stream < 4000; ++stream) {
    geogate::proxy::SseKeyScanner scanner;
    std::string start = RandomText(rng);
    if (change(rng) == 0) start += std::string(200, 'x');  // longer than it holds
    for (int event = 0; event < 24; ++event) {
      std::string d = start + RandomText(rng);
      switch (change(rng)) {
        case 0:
          start = RandomText(rng);
          break;
        case 1:
          if (!d.empty()) d[std::uniform_int_distribution<size_t>(0, d.size() - 1)(rng)] = '"';
          break;
        case 2:
          d.resize(std::uniform_int_distribution<size_t>(0, d.size())(rng));
          break;
        default:
          break;
      }
      INFO("stream " << stream << " event " << event << " data: " << d);
      SseEventKeys a = scanner.Find(d), b = KeysByFind(d);
      REQUIRE(a.usage == b.usage);
      REQUIRE(a.content == b.content);
      REQUIRE(a.empty_choices == b.empty_choices);
    }
  }
  // A chat stream as vLLM sends it: the keys of every chunk.
  geogate::proxy::SseKeyScanner scanner;
  const std::string head =
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{)";
  CHECK(scanner.Find(head + R"("role":"assistant","content":"a"}}]})").content);
  CHECK(scanner.Find(head + R"("content":"b"}}]})").content);
  CHECK(scanner.Find(head + R"("content":"c"}}]})").content);
  SseEventKeys k = scanner.Find(head + R"(},"finish_reason":"stop"}]})");
  CHECK((!k.content && !k.usage));
  k = scanner.Find(
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1}})");
  CHECK((!k.content && k.usage && k.empty_choices));
}
