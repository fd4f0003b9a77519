#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>

#include "proxy/request_body.h"

using namespace geogate::proxy;
namespace json = boost::json;

TEST_CASE("body facts: model, stream and include_usage", "[body]") {
  auto b = RequestBody::Parse(
      R"({"model":"llama-8b","stream":true,"stream_options":{"include_usage":true},"messages":[]})");
  REQUIRE(b.facts().status == BodyFacts::Status::kOk);
  CHECK(b.facts().model == "llama-8b");
  CHECK(b.facts().stream);
  CHECK(b.facts().include_usage);

  auto plain = RequestBody::Parse(R"({"model":"m","messages":[{"role":"user","content":"x"}]})");
  REQUIRE(plain.facts().status == BodyFacts::Status::kOk);
  CHECK_FALSE(plain.facts().stream);
  CHECK_FALSE(plain.facts().include_usage);
}

TEST_CASE("body facts: the model name is a view of the body unless escaped", "[body]") {
  std::string text = R"({"model":"meta-llama/Llama-3.1-70B-Instruct","messages":[]})";
  auto b = RequestBody::Parse(text);
  REQUIRE(b.facts().status == BodyFacts::Status::kOk);
  CHECK(b.facts().model == "meta-llama/Llama-3.1-70B-Instruct");
  CHECK(b.facts().model.data() == text.data() + text.find("meta-llama"));

  // Escapes are decoded into the body's own copy, which survives a move.
  std::string escaped = R"({"model":"meta-llama\/Llama-3.1-70B-Instruct"})";
  auto e = RequestBody::Parse(escaped);
  RequestBody moved = std::move(e);
  REQUIRE(moved.facts().status == BodyFacts::Status::kOk);
  CHECK(moved.facts().model == "meta-llama/Llama-3.1-70B-Instruct");
  const char* m = moved.facts().model.data();
  CHECK((m < escaped.data() || m >= escaped.data() + escaped.size()));
}

TEST_CASE("body facts: a member the gateway decides on may not repeat", "[body]") {
  // Backends' JSON parsers disagree on which copy of a repeated name wins
  // (RFC 8259 4): a body that routes on one model could be served as
  // another. Such a body is refused as invalid JSON, whatever the spelling.
  auto refused = [](std::string_view body) {
    RequestBody b = RequestBody::Parse(body);
    INFO(body);
    CHECK(b.facts().status == BodyFacts::Status::kInvalidJson);
    return b.facts().error;
  };
  CHECK(refused(R"({"model":"a","model":"b"})").find("'model'") != std::string::npos);
  refused(R"({"model":"a","messages":[],"model":"a"})");  // even the same value
  refused(R"({"model":"a\u0062","model":"plain"})");
  refused(R"({"model":"eu-only","mod\u0065l":"us-only"})");  // an escaped key is the same key
  refused(R"({"\u006dodel":"x","model":"y"})");
  refused(R"({"model":"m","model":42})");  // the second one is not even a string
  refused(R"({"model":"m","stream":true,"stream":false})");
  refused(R"({"model":"m","stream_options":{},"stream_options":{"include_usage":true}})");
  refused(R"({"model":"m","stream_options":{"include_usage":true,"include_usage":false}})");

  // The same names elsewhere are other members and stay accepted.
  for (std::string_view ok : {
           R"({"model":"m","messages":[{"model":"x"},{"model":"y"}]})",
           R"({"model":"m","metadata":{"model":"x","stream":true}})",
           R"({"model":"m","modelx":"a","Model":"b","model ":"c"})",
           R"({"model":"m","stream_options":{"include_usage":true},"x":{"include_usage":1}})",
       }) {
    INFO(ok);
    CHECK(RequestBody::Parse(ok).facts().status == BodyFacts::Status::kOk);
  }
}

TEST_CASE("body facts: malformed bodies are classified", "[body]") {
  CHECK(RequestBody::Parse("").facts().status == BodyFacts::Status::kInvalidJson);
  CHECK(RequestBody::Parse("{\"model\":").facts().status == BodyFacts::Status::kInvalidJson);
  CHECK(RequestBody::Parse("{\"model\":\"m\"} trailing").facts().status ==
        BodyFacts::Status::kInvalidJson);
  CHECK(RequestBody::Parse("[1,2]").facts().status == BodyFacts::Status::kNotObject);
  CHECK(RequestBody::Parse("\"str\"").facts().status == BodyFacts::Status::kNotObject);
  CHECK(RequestBody::Parse("{}").facts().status == BodyFacts::Status::kMissingModel);
  CHECK(RequestBody::Parse(R"({"model":42})").facts().status == BodyFacts::Status::kMissingModel);
  CHECK(RequestBody::Parse(R"({"model":""})").facts().status == BodyFacts::Status::kMissingModel);
  // A non-boolean stream is treated as absent, not as an error.
  CHECK_FALSE(RequestBody::Parse(R"({"model":"m","stream":"yes"})").facts().stream);
}

TEST_CASE("rewrite: nothing to change forwards the original bytes", "[body]") {
  auto b = RequestBody::Parse(R"({"model":"m","stream":false})");
  CHECK_FALSE(b.Rewrite("m", true).has_value());  // not streaming: no usage injection
  auto s =
      RequestBody::Parse(R"({"model":"m","stream":true,"stream_options":{"include_usage":true}})");
  CHECK_FALSE(s.Rewrite("m", true).has_value());  // the client asked already
}

TEST_CASE("rewrite: alias to canonical name and usage injection", "[body]") {
  auto b = RequestBody::Parse(R"({"model":"llama-8b","stream":true,"temperature":0.5})");
  auto out = b.Rewrite("llama-3.1-8b", true);
  REQUIRE(out.has_value());
  json::value v = json::parse(*out);
  CHECK(v.at("model").as_string() == "llama-3.1-8b");
  CHECK(v.at("stream_options").at("include_usage").as_bool());
  CHECK(v.at("temperature").as_double() == 0.5);

  auto no_usage =
      RequestBody::Parse(R"({"model":"llama-8b","stream":true})").Rewrite("llama-3.1-8b", false);
  REQUIRE(no_usage.has_value());
  CHECK_FALSE(json::parse(*no_usage).as_object().contains("stream_options"));

  // An existing stream_options object keeps its other members.
  auto keep = RequestBody::Parse(R"({"model":"m","stream":true,"stream_options":{"x":1}})")
                  .Rewrite("m", true);
  REQUIRE(keep.has_value());
  json::value kv = json::parse(*keep);
  CHECK(kv.at("stream_options").at("x").as_int64() == 1);
  CHECK(kv.at("stream_options").at("include_usage").as_bool());
}

TEST_CASE("rewrite: usage request spliced into the original bytes", "[body]") {
  // Only include_usage to add: the body keeps its bytes, member order and
  // spacing; the new member goes before the closing brace.
  std::string text = "{\"model\": \"m\", \"stream\": true, \"temperature\": 1e-1}\r\n";
  auto out = RequestBody::Parse(text).Rewrite("m", true);
  REQUIRE(out.has_value());
  CHECK(*out ==
        "{\"model\": \"m\", \"stream\": true, \"temperature\": 1e-1"
        ",\"stream_options\":{\"include_usage\":true}}\r\n");
  json::value v = json::parse(*out);
  CHECK(v.at("stream_options").at("include_usage").as_bool());

  // include_usage:false, or a stream_options that is not an object, is
  // amended in a document instead: the result has exactly one member.
  for (const char* body :
       {R"({"model":"m","stream":true,"stream_options":{"include_usage":false}})",
        R"({"model":"m","stream":true,"stream_options":null})"}) {
    auto amended = RequestBody::Parse(body).Rewrite("m", true);
    REQUIRE(amended.has_value());
    CHECK(json::parse(*amended).at("stream_options").at("include_usage").as_bool());
    CHECK(amended->find("stream_options") == amended->rfind("stream_options"));
  }
}

TEST_CASE("alias rewrite of a streamed body: its document in Rewrite's own arena", "[body]") {
  auto b = RequestBody::Parse(
      R"({"model":"llama-8b","stream":true,"messages":[{"role":"user","content":"hi"}]})");
  REQUIRE(b.facts().status == BodyFacts::Status::kOk);
  CHECK(b.facts().model == "llama-8b");
  CHECK(b.facts().stream);
  auto out = b.Rewrite("llama-3.1-8b", true);
  REQUIRE(out.has_value());
  json::value v = json::parse(*out);
  CHECK(v.at("model").as_string() == "llama-3.1-8b");
  CHECK(v.at("messages").at(0).at("content").as_string() == "hi");
  CHECK(v.at("stream_options").at("include_usage").as_bool());

  auto bad = RequestBody::Parse("{not json");
  CHECK(bad.facts().status == BodyFacts::Status::kInvalidJson);
}
