#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>

#include "gateway/openai_error.h"

using namespace geogate::gateway;
namespace json = boost::json;

TEST_CASE("every error kind maps to DESIGN.md's status, type and code", "[errors]") {
  struct Row {
    ErrorKind kind;
    unsigned status;
    const char* type;
    const char* code;
  };
  const Row rows[] = {
      {ErrorKind::kBadRequest, 400, "invalid_request_error", "bad_request"},
      {ErrorKind::kInvalidJson, 400, "invalid_request_error", "invalid_json"},
      {ErrorKind::kMissingModel, 400, "invalid_request_error", "missing_model"},
      {ErrorKind::kBadResidencyHeader, 400, "invalid_request_error", "bad_residency_header"},
      {ErrorKind::kInvalidApiKey, 401, "authentication_error", "invalid_api_key"},
      {ErrorKind::kNotFound, 404, "invalid_request_error", "not_found"},
      {ErrorKind::kModelNotFound, 404, "invalid_request_error", "model_not_found"},
      {ErrorKind::kHeaderTimeout, 408, "invalid_request_error", "header_timeout"},
      {ErrorKind::kBodyTimeout, 408, "invalid_request_error", "body_timeout"},
      {ErrorKind::kBodyTooLarge, 413, "invalid_request_error", "body_too_large"},
      {ErrorKind::kRateLimited, 429, "rate_limit_error", "rate_limited"},
      {ErrorKind::kCapacityExhausted, 429, "rate_limit_error", "capacity_exhausted"},
      {ErrorKind::kBudgetExceeded, 429, "rate_limit_error", "budget_exceeded"},
      {ErrorKind::kHeadersTooLarge, 431, "invalid_request_error", "headers_too_large"},
      {ErrorKind::kResidencyDenied, 451, "residency_violation", "residency_denied"},
      {ErrorKind::kUpstreamFailed, 502, "upstream_error", "upstream_failed"},
      {ErrorKind::kNoCompliantBackend, 503, "upstream_error", "no_compliant_backend"},
      {ErrorKind::kConnectionLimit, 503, "server_error", "too_many_connections"},
      {ErrorKind::kIpConnectionLimit, 503, "server_error", "too_many_connections_per_ip"},
      {ErrorKind::kFirstTokenTimeout, 504, "upstream_error", "first_token_timeout"},
  };
  for (const Row& r : rows) {
    ErrorSpec s = SpecOf(r.kind);
    CHECK(s.status == r.status);
    CHECK(std::string(s.type) == r.type);
    CHECK(std::string(s.code) == r.code);
    json::value v = json::parse(ErrorBody(r.kind, "why"));
    const json::object& e = v.at("error").as_object();
    CHECK(e.at("message").as_string() == "why");
    CHECK(e.at("type").as_string() == r.type);
    CHECK(e.at("code").as_string() == r.code);
  }
}

TEST_CASE("error messages are escaped into valid JSON", "[errors]") {
  std::string nasty = "quote \" backslash \\ newline \n tab \t ctrl \x01 end";
  json::value v = json::parse(ErrorBody(ErrorKind::kBadRequest, nasty));
  CHECK(v.at("error").at("message").as_string() == nasty);
}

TEST_CASE("JSON string escaping round-trips every byte and keeps clean runs whole", "[errors]") {
  std::string all;
  for (int c = 1; c < 256; ++c)
    all.push_back(static_cast<char>(c));
  all += "\xc3\xa9 UTF-8 stays as it is";
  std::string out = "prefix:";
  AppendJsonString(out, all);
  REQUIRE(out.rfind("prefix:\"", 0) == 0);
  // Bytes >= 0x80 are not valid UTF-8 on their own: compare the 7-bit part
  // through a parser, and the rest byte for byte.
  std::string ascii(all.begin(), all.begin() + 127);
  std::string ascii_out;
  AppendJsonString(ascii_out, ascii);
  CHECK(json::parse(ascii_out).as_string() == ascii);
  CHECK(out.find("\\u0001") != std::string::npos);
  CHECK(out.find("\\u001f") != std::string::npos);
  CHECK(out.find("\\n") != std::string::npos);
  CHECK(out.find("\xc3\xa9 UTF-8 stays as it is\"") != std::string::npos);

  std::string plain;
  AppendJsonString(plain, "eu-west-l4-1");
  CHECK(plain == "\"eu-west-l4-1\"");
  std::string empty;
  AppendJsonString(empty, "");
  CHECK(empty == "\"\"");
  std::string edges;
  AppendJsonString(edges, "\"a\\");
  CHECK(edges == R"("\"a\\")");
}

TEST_CASE("JSON string escaping finds a special byte at any place in a word", "[errors]") {
  // WriteJsonString checks eight bytes at a time: put each kind of byte at
  // every offset of strings longer and shorter than a word, and compare with
  // the escape written byte by byte.
  auto reference = [](std::string_view s) {
    std::string out = "\"";
    for (unsigned char u : s) {
      if (u == '"' || u == '\\') {
        out += '\\';
        out += static_cast<char>(u);
      } else if (u == '\n') {
        out += "\\n";
      } else if (u == '\r') {
        out += "\\r";
      } else if (u == '\t') {
        out += "\\t";
      } else if (u < 0x20) {
        static constexpr char kHex[] = "0123456789abcdef";
        out += "\\u00";
        out += kHex[u >> 4];
        out += kHex[u & 0xf];
      } else {
        out += static_cast<char>(u);
      }
    }
    return out + "\"";
  };
  const char specials[] = {'"',    '\\',   '\n',   '\x01', '\x1f', '\x20', '\x21',
                           '\x5b', '\x5d', '\x7f', '\x80', '\xff', 'a'};
  for (size_t len = 1; len <= 27; ++len) {
    for (size_t pos = 0; pos < len; ++pos) {
      for (char c : specials) {
        std::string s(len, 'x');
        s[pos] = c;
        if (pos + 9 < len) s[pos + 9] = '"';  // a second one in a later word
        std::string out(JsonStringBound(s), '\0');
        out.resize(static_cast<size_t>(WriteJsonString(out.data(), s) - out.data()));
        INFO("len " << len << " pos " << pos << " byte " << static_cast<int>(c));
        REQUIRE(out == reference(s));
      }
    }
  }
}

TEST_CASE("the mid-stream error event is one SSE data event with stream_interrupted", "[errors]") {
  std::string ev = StreamErrorEvent("backend died");
  REQUIRE(ev.rfind("data: ", 0) == 0);
  REQUIRE(ev.size() > 2);
  CHECK(ev.substr(ev.size() - 2) == "\n\n");
  CHECK(ev.find('\n') == ev.size() - 2);  // a single data line
  json::value v = json::parse(ev.substr(6, ev.size() - 8));
  CHECK(v.at("error").at("code").as_string() == "stream_interrupted");
  CHECK(v.at("error").at("type").as_string() == "upstream_error");
  CHECK(v.at("error").at("message").as_string() == "backend died");
}
