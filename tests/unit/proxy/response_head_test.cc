#include <catch2/catch.hpp>

#include "proxy/response_head.h"

using namespace geogate::proxy;

TEST_CASE("response head: content-length, chunked and close-delimited framing", "[head]") {
  ResponseHead a(200, "OK", 11);
  a.set(http::field::content_type, "application/json");
  a.SetFraming(42, false, true);
  CHECK(a.text() ==
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 42\r\n\r\n");

  ResponseHead b(200, "", 11);
  b.SetFraming(std::nullopt, true, false);
  CHECK(b.text() == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");

  ResponseHead c(404, "Not Found", 10);
  c.SetFraming(std::nullopt, false, false);
  CHECK(c.text() == "HTTP/1.0 404 Not Found\r\n\r\n");

  ResponseHead d(200, "OK", 10);
  d.SetFraming(3, false, true);
  CHECK(d.text() == "HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n");
}
