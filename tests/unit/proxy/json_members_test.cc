#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "proxy/json_members.h"

using namespace geogate::proxy;
using Kind = JsonMemberValue::Kind;

namespace {

struct Seen {
  size_t path;
  Kind kind;
  std::string text;
  int64_t int64;
  bool boolean;
};

struct Result {
  JsonTopLevel top;
  std::vector<Seen> seen;
};

Result Read(std::string_view text, std::initializer_list<JsonMemberPath> paths) {
  std::vector<JsonMemberPath> p(paths);
  Result r;
  boost::system::error_code ec;
  r.top = ReadJsonMembers(
      text, p,
      [&](size_t i, const JsonMemberValue& v) {
        r.seen.push_back({i, v.kind, std::string(v.text), v.int64, v.boolean});
      },
      ec);
  CHECK((r.top == JsonTopLevel::kInvalid) == bool(ec));
  return r;
}

}  // namespace

TEST_CASE("json members: top-level and nested members by path, in order", "[json]") {
  auto r = Read(R"({"model":"m1","messages":[{"model":"inner"}],"stream":true,)"
                R"("stream_options":{"include_usage":false,"x":{"include_usage":true}},"n":-3})",
                {{"", "model"}, {"", "stream"}, {"stream_options", "include_usage"}, {"", "n"}});
  REQUIRE(r.top == JsonTopLevel::kObject);
  REQUIRE(r.seen.size() == 4);  // not the model inside messages, not x.include_usage
  CHECK(r.seen[0].path == 0);
  CHECK(r.seen[0].kind == Kind::kString);
  CHECK(r.seen[0].text == "m1");
  CHECK(r.seen[1].path == 1);
  CHECK(r.seen[1].boolean);
  CHECK(r.seen[2].path == 2);
  CHECK(r.seen[2].kind == Kind::kBool);
  CHECK_FALSE(r.seen[2].boolean);
  CHECK(r.seen[3].kind == Kind::kInt64);
  CHECK(r.seen[3].int64 == -3);
}

TEST_CASE("json members: a nested path only matches inside an object member", "[json]") {
  // "usage" as an array, or an array element that is an object, is not usage.x
  auto r = Read(R"({"usage":[{"prompt_tokens":1}],"list":[{"usage":{"prompt_tokens":2}}]})",
                {{"usage", "prompt_tokens"}, {"", "usage"}});
  REQUIRE(r.top == JsonTopLevel::kObject);
  REQUIRE(r.seen.size() == 1);
  CHECK(r.seen[0].path == 1);
  CHECK(r.seen[0].kind == Kind::kArray);
}

TEST_CASE("json members: escaped and long strings and keys arrive whole", "[json]") {
  std::string long_value(5000, 'a');
  long_value += "\\n\\u00e9\\\"end";
  std::string text = R"({"mo\u0064el":")" + long_value + R"(","x":1})";
  auto r = Read(text, {{"", "model"}});
  REQUIRE(r.top == JsonTopLevel::kObject);
  REQUIRE(r.seen.size() == 1);
  CHECK(r.seen[0].text == std::string(5000, 'a') + "\n\xc3\xa9\"end");

  std::string long_key(300, 'k');
  auto k = Read(R"({")" + long_key + R"(":1,"model":"m"})", {{"", "model"}});
  REQUIRE(k.seen.size() == 1);
  CHECK(k.seen[0].text == "m");
}

TEST_CASE("json members: the top level is classified and bad JSON rejected", "[json]") {
  auto top = [](const std::string& text) { return Read(text, {{"", "model"}}).top; };
  CHECK(top("[1,2]") == JsonTopLevel::kNotObject);
  CHECK(top("\"s\"") == JsonTopLevel::kNotObject);
  CHECK(top("42") == JsonTopLevel::kNotObject);
  CHECK(top("{}") == JsonTopLevel::kObject);
  CHECK(top("{} \r\n\t") == JsonTopLevel::kObject);
  CHECK(top("") == JsonTopLevel::kInvalid);
  CHECK(top("{\"model\":") == JsonTopLevel::kInvalid);
  CHECK(top("{\"a\":1} trailing") == JsonTopLevel::kInvalid);
  CHECK(top("{\"a\":1}{}") == JsonTopLevel::kInvalid);
  CHECK(top("{\"a\":1,}") == JsonTopLevel::kInvalid);
  CHECK(top("{\"a\":01}") == JsonTopLevel::kInvalid);
  CHECK(top("{\"a\":\"\x01\"}") == JsonTopLevel::kInvalid);
  CHECK(top("{/*c*/}") == JsonTopLevel::kInvalid);
  std::string deep(40, '[');
  CHECK(top("{\"a\":" + deep + std::string(40, ']') + "}") ==
        JsonTopLevel::kInvalid);  // deeper than Boost.JSON's default 32
}

TEST_CASE("json members: a repeated member is reported each time", "[json]") {
  auto r = Read(R"({"model":"a","model":5,"model":"c"})", {{"", "model"}});
  REQUIRE(r.seen.size() == 3);
  CHECK(r.seen[1].kind == Kind::kInt64);
  CHECK(r.seen[2].text == "c");
}

TEST_CASE("json members: a path within a top-level member reaches the third level", "[json]") {
  // response.usage.input_tokens, as a Responses API stream's final event has
  // it; the same names at other places or depths are not it.
  auto r = Read(R"({"usage":{"input_tokens":1},"response":{"input_tokens":2,)"
                R"("output":[{"usage":{"input_tokens":3}}],"x":{"usage":{"input_tokens":4}},)"
                R"("usage":{"input_tokens":5,"output_tokens":6}}})",
                {{"usage", "input_tokens", "response"},
                 {"usage", "output_tokens", "response"},
                 {"response", "usage"},
                 {"usage", "input_tokens"}});
  REQUIRE(r.top == JsonTopLevel::kObject);
  REQUIRE(r.seen.size() == 4);
  CHECK(r.seen[0].path == 3);  // the top-level usage.input_tokens
  CHECK(r.seen[0].int64 == 1);
  CHECK(r.seen[1].path == 2);
  CHECK(r.seen[1].kind == Kind::kObject);
  CHECK(r.seen[2].path == 0);
  CHECK(r.seen[2].int64 == 5);
  CHECK(r.seen[3].path == 1);
  CHECK(r.seen[3].int64 == 6);

  // Inside an array at any level, it is not the path.
  auto a = Read(R"({"response":[{"usage":{"input_tokens":1}}],)"
                R"("other":{"usage":[{"input_tokens":2}]}})",
                {{"usage", "input_tokens", "response"}, {"usage", "input_tokens", "other"}});
  CHECK(a.seen.empty());
}

TEST_CASE("last top-level member: found from the end, at the top level only", "[json]") {
  auto usage = [](std::string_view text) { return LastTopLevelMember(text, "usage"); };
  // After the choices, or before other members; whitespace around it goes.
  CHECK(usage(R"({"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1}})") ==
        R"({"prompt_tokens":1})");
  CHECK(usage(R"({"usage" : { "a" : 1 } , "model":"m","n":[1,{"b":2}]}  )"
              "\n") == R"({ "a" : 1 })");
  CHECK(usage(R"({"usage":null})") == "null");
  // Nested members of the name, in objects and arrays, are not it.
  CHECK(usage(R"({"x":{"usage":1},"y":[{"usage":2}]})") == std::nullopt);
  CHECK(usage(R"({"usage":3,"x":{"usage":1},"y":[{"usage":2}]})") == "3");
  // Strings that look like members, with escaped quotes and braces in them.
  CHECK(usage(R"({"usage":4,"s":"\",\"usage\":5}\\","t":"{[\"usage\":6"})") == "4");
  CHECK(usage(R"({"s":"\\","usage":7})") == "7");
  CHECK(usage(R"({"usage":"usage","k":"usage"})") == R"("usage")");
  // The last one, as a parsed document keeps it.
  CHECK(usage(R"({"usage":1,"usage":2})") == "2");
  // Not an object's end: cut short, not JSON, no such member, an unterminated string.
  CHECK(usage(R"({"usage":{"prompt_tokens":4},"choices":[)") == std::nullopt);
  CHECK(usage(R"([{"usage":1}])") == std::nullopt);
  CHECK(usage("") == std::nullopt);
  CHECK(usage("   }") == std::nullopt);
  CHECK(usage(R"({"usages":1,"usag":2})") == std::nullopt);
  CHECK(usage(R"(x"usage":1})") == std::nullopt);
  CHECK(usage(R"("usage":1})") == std::nullopt);
}

TEST_CASE("last top-level member agrees with a parsed document", "[json]") {
  // Random answers with usage members at the top and nested, keys and
  // strings full of quotes, backslashes and brackets: the member found from
  // the end is the document's.
  std::mt19937 rng(20261205);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  static const char* kPieces[] = {"usage", "\\\"", "\\\\", "{",   "}", "[",      "]",
                                  ":",     ",",    " ",    "\\n", "x", "\\u0022"};
  auto str = [&] {
    std::string s = "\"";
    for (int n = pick(6); n > 0; --n)
      s += kPieces[pick(std::size(kPieces))];
    return s + "\"";
  };
  std::function<std::string(int)> value = [&](int depth) -> std::string {
    int kind = pick(depth > 2 ? 3 : 5);
    if (kind == 0) return std::to_string(pick(1000));
    if (kind == 1) return str();
    if (kind == 2) return pick(2) ? "null" : "true";
    std::string out;
    if (kind == 3) {
      out = "[";
      for (int n = pick(4); n > 0; --n)
        out += value(depth + 1) + (n > 1 ? "," : "");
      return out + "]";
    }
    out = "{";
    for (int n = pick(4); n > 0; --n) {
      out += (pick(3) == 0 ? std::string("\"usage\"") : str()) + (pick(2) ? ":" : " : ");
      out += value(depth + 1) + (n > 1 ? "," : "");
    }
    return out + "}";
  };
  int with_usage = 0;
  for (int round = 0; round < 2000; ++round) {
    // Distinct top-level keys (a document keeps one of each), usage among them or not.
    std::vector<std::string> keys = {"\"choices\"", "\"model\"", "\"x\\\"usage\""};
    if (pick(4) != 0) keys.push_back("\"usage\"");
    std::shuffle(keys.begin(), keys.end(), rng);
    std::string text = "{";
    for (size_t k = 0; k < keys.size(); ++k)
      text += (k ? "," : "") + keys[k] + ":" + value(1);
    text += pick(2) ? "}" : "} \n";
    boost::system::error_code ec;
    boost::json::value doc = boost::json::parse(text, ec);
    REQUIRE_FALSE(ec);
    const boost::json::value* want = doc.as_object().if_contains("usage");
    std::optional<std::string_view> got = LastTopLevelMember(text, "usage");
    INFO(text);
    REQUIRE(got.has_value() == (want != nullptr));
    if (!want) continue;
    ++with_usage;
    boost::json::value parsed = boost::json::parse(*got, ec);
    REQUIRE_FALSE(ec);
    CHECK(parsed == *want);
    // Every tail of the answer: the member, or nothing; never another
    // value. Found in a tail, found in every longer one.
    bool found_shorter = false;
    for (size_t cut = text.size(); cut-- > 0;) {
      std::optional<std::string_view> in_tail =
          LastTopLevelMemberOfTail(std::string_view(text).substr(cut), "usage");
      INFO(cut);
      if (in_tail) {
        REQUIRE(*in_tail == *got);
        found_shorter = true;
      } else {
        REQUIRE_FALSE(found_shorter);
      }
    }
    CHECK(found_shorter);
  }
  CHECK(with_usage > 1000);
}

TEST_CASE("last top-level member of a tail: a cut string's escaping is not guessed", "[json]") {
  auto usage = [](std::string_view tail) { return LastTopLevelMemberOfTail(tail, "usage"); };
  // The tail of {"a":"x\"usage\":{\"n\":2}","usage":{"n":1}}, cut in the
  // first string: the real member is found, the one inside the string not.
  CHECK(usage(R"(usage\":{\"n\":2}","usage":{"n":1}})") == R"({"n":1})");
  // A quote with nothing or only backslashes before it in the tail may be
  // escaped by a backslash before the cut: the scan ends there.
  CHECK(usage(R"("usage":{"n":2}})") == std::nullopt);
  CHECK(usage(R"(\"usage":{"n":2}})") == std::nullopt);
  CHECK(usage(R"(\\"usage":{"n":2}})") == std::nullopt);
  CHECK(usage(R"(x\\"usage":{"n":2}})") == R"({"n":2})");
  CHECK(usage(R"( "usage":{"n":2}})") == R"({"n":2})");
  // No object's end, or the scan reaches the start.
  CHECK(usage(R"(:{"n":1}})") == std::nullopt);
  CHECK(usage(R"("usage":{"n":1},"x":[)") == std::nullopt);
}
