#include <catch2/catch.hpp>

#include <string>

#include "proxy/header_line.h"

using geogate::common::PooledString;
using geogate::proxy::AppendHeaderLine;

TEST_CASE("header line: name, colon, space, value, CRLF after what is there", "[header_line]") {
  PooledString out = "HTTP/1.1 200 OK\r\n";
  AppendHeaderLine(out, "x-request-id", "abc");
  AppendHeaderLine(out, "x-empty", "");
  CHECK(out == "HTTP/1.1 200 OK\r\nx-request-id: abc\r\nx-empty: \r\n");
}

TEST_CASE("header line: every length, short or long, comes out whole", "[header_line]") {
  // Around the size put together on the stack (192 bytes with ": " and
  // CRLF), and far past it (an API key, a long tracestate).
  for (size_t value_size : {0, 170, 171, 172, 173, 174, 175, 176, 177, 178, 1000, 9000}) {
    INFO(value_size);
    std::string name = "x-some-field";
    std::string value(value_size, 'v');
    if (!value.empty()) value.back() = '!';
    PooledString out = "GET / HTTP/1.1\r\n";
    AppendHeaderLine(out, name, value);
    CHECK(std::string_view(out) == "GET / HTTP/1.1\r\n" + name + ": " + value + "\r\n");
  }
}
