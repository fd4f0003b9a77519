#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>

#include "proxy/openai_error.h"

using namespace geogate::proxy;
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
      {ErrorKind::kOriginNotAllowed, 403, "permission_error", "origin_not_allowed"},
      {ErrorKind::kNotFound, 404, "invalid_request_error", "not_found"},
      {ErrorKind::kModelNotFound, 404, "invalid_request_error", "model_not_found"},
      {ErrorKind::kHeaderTimeout, 408, "invalid_request_error", "header_timeout"},
      {ErrorKind::kBodyTimeout, 408, "invalid_request_error", "body_timeout"},
      {ErrorKind::kBodyTooLarge, 413, "invalid_request_error", "body_too_large"},
      {ErrorKind::kEncodedBody, 415, "invalid_request_error", "unsupported_content_encoding"},
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

TEST_CASE("a Responses stream's error event is the API's error event around the same object",
          "[errors]") {
  std::string ev = ResponsesStreamErrorEvent("backend died", 7);
  CHECK(ev ==
        "event: error\n"
        "data: "
        R"({"type":"error","sequence_number":7,"error":{"message":"backend died",)"
        R"("type":"upstream_error","code":"stream_interrupted"}})"
        "\n\n");
  json::value v = json::parse(ev.substr(ev.find("data: ") + 6));
  CHECK(v.at("error") == json::parse(StreamErrorEvent("backend died").substr(6)).at("error"));
}

TEST_CASE("error bodies keep their exact shape: error{message, type, code}", "[errors]") {
  CHECK(ErrorBody(ErrorKind::kModelNotFound, "no model \"x\"") ==
        R"({"error":{"message":"no model \"x\"","type":"invalid_request_error",)"
        R"("code":"model_not_found"}})");
  CHECK(StreamErrorEvent("backend died") ==
        "data: "
        R"({"error":{"message":"backend died","type":"upstream_error",)"
        R"("code":"stream_interrupted"}})"
        "\n\n");
}
