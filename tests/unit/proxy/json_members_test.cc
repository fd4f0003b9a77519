#include <catch2/catch.hpp>

#include <string>
#include <vector>

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
