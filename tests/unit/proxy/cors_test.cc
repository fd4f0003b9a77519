// CORS decisions: which origin a response allows, which OPTIONS requests
// are preflights and whether they are allowed, and the fields written for
// each, over a listener's policy (no sockets).
#include <catch2/catch.hpp>

#include <string>

#include <boost/beast/http/fields.hpp>

#include "proxy/cors.h"
#include "proxy/response_head.h"

using namespace geogate::proxy;
using geogate::config::Cors;

namespace {

Cors Listed() {
  Cors c;
  c.allowed_origins = {"https://app.example.com", "http://localhost:5173"};
  c.allowed_headers = "authorization, content-type";
  c.max_age_s = 600;
  return c;
}

Cors AnyOrigin() {
  Cors c;
  c.any_origin = true;
  c.allowed_headers = "authorization";
  c.max_age_s = 86400;
  return c;
}

}  // namespace

TEST_CASE("cors: the allowed origin is the listed origin itself, '*' for any", "[cors]") {
  Cors listed = Listed();
  CHECK(CorsAllowOrigin(&listed, "https://app.example.com") == "https://app.example.com");
  CHECK(CorsAllowOrigin(&listed, "http://localhost:5173") == "http://localhost:5173");
  // Byte for byte: near misses are other origins.
  for (const char* other : {"https://app.example.com.evil.test", "https://evil.test",
                            "http://app.example.com", "https://app.example.com:8443",
                            "https://APP.example.com", "https://app.example.co", "null", ""})
    CHECK(CorsAllowOrigin(&listed, other).empty());
  Cors any = AnyOrigin();
  CHECK(CorsAllowOrigin(&any, "https://anything.test") == "*");
  CHECK(CorsAllowOrigin(&any, "").empty());  // no Origin: not a CORS request
  CHECK(CorsAllowOrigin(nullptr, "https://app.example.com").empty());
}

TEST_CASE("cors: a preflight is OPTIONS with Origin and Access-Control-Request-Method", "[cors]") {
  Cors listed = Listed();
  const char* ok = "https://app.example.com";
  CHECK(DecidePreflight(&listed, true, ok, "POST") == PreflightVerdict::kAllowed);
  CHECK(DecidePreflight(&listed, true, "https://evil.test", "POST") == PreflightVerdict::kRefused);
  CHECK(DecidePreflight(&listed, false, ok, "POST") == PreflightVerdict::kNotPreflight);
  CHECK(DecidePreflight(&listed, true, "", "POST") == PreflightVerdict::kNotPreflight);
  CHECK(DecidePreflight(&listed, true, ok, "") == PreflightVerdict::kNotPreflight);
  CHECK(DecidePreflight(nullptr, true, ok, "POST") == PreflightVerdict::kNotPreflight);
  Cors any = AnyOrigin();
  CHECK(DecidePreflight(&any, true, "https://evil.test", "POST") == PreflightVerdict::kAllowed);
}

TEST_CASE("cors: an allowed preflight's fields", "[cors]") {
  Cors listed = Listed();
  boost::beast::http::fields f;
  AddPreflightFields(f, listed, "http://localhost:5173");
  CHECK(f["Access-Control-Allow-Origin"] == "http://localhost:5173");
  CHECK(f["Access-Control-Allow-Methods"] == "GET, HEAD, POST, OPTIONS");
  CHECK(f["Access-Control-Allow-Headers"] == "authorization, content-type");
  CHECK(f["Access-Control-Max-Age"] == "600");
  CHECK(f["Vary"] == "Origin");
  CHECK(f.count("Access-Control-Allow-Credentials") == 0);  // keys go in Authorization

  Cors any = AnyOrigin();
  boost::beast::http::fields g;
  AddPreflightFields(g, any, "https://x.test");
  CHECK(g["Access-Control-Allow-Origin"] == "*");
  CHECK(g["Access-Control-Max-Age"] == "86400");

  Cors no_headers = Listed();
  no_headers.allowed_headers.clear();
  boost::beast::http::fields h;
  AddPreflightFields(h, no_headers, "http://localhost:5173");
  CHECK(h.count("Access-Control-Allow-Headers") == 0);
}

TEST_CASE("cors: an actual response's fields, for allowed and other origins", "[cors]") {
  Cors listed = Listed();
  boost::beast::http::fields allowed;
  AddCorsResponseFields(allowed, &listed, "https://app.example.com");
  CHECK(allowed["Access-Control-Allow-Origin"] == "https://app.example.com");
  std::string expose(allowed["Access-Control-Expose-Headers"]);
  for (const char* h : {"x-request-id", "retry-after", "x-geogate-region", "x-geogate-backend"})
    CHECK(expose.find(h) != std::string::npos);
  CHECK(allowed["Vary"] == "Origin");

  // Another origin, or none: no CORS fields, but the answer still varies
  // by Origin for a cache.
  for (const char* other : {"https://evil.test", ""}) {
    boost::beast::http::fields f;
    AddCorsResponseFields(f, &listed, other);
    CHECK(f.count("Access-Control-Allow-Origin") == 0);
    CHECK(f.count("Access-Control-Expose-Headers") == 0);
    CHECK(f["Vary"] == "Origin");
  }

  // Every origin: the same answer for all, no Vary.
  Cors any = AnyOrigin();
  boost::beast::http::fields star;
  AddCorsResponseFields(star, &any, "https://x.test");
  CHECK(star["Access-Control-Allow-Origin"] == "*");
  CHECK(star.count("Vary") == 0);

  boost::beast::http::fields off;
  AddCorsResponseFields(off, nullptr, "https://app.example.com");
  CHECK(off.begin() == off.end());
}

TEST_CASE("cors: the fields go into a serialised response head as into Beast's", "[cors]") {
  Cors listed = Listed();
  ResponseHead head(200, "OK", 11);
  AddCorsResponseFields(head, &listed, "https://app.example.com");
  head.SetFraming(0, false, true);
  std::string text(head.text());
  CHECK(text.find("\r\nAccess-Control-Allow-Origin: https://app.example.com\r\n") !=
        std::string::npos);
  CHECK(text.find("\r\nVary: Origin\r\n") != std::string::npos);
}
