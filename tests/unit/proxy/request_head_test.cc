#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "proxy/headers.h"

using namespace geogate::proxy;

namespace {

std::optional<ErrorKind> Refused(const Fields& f, unsigned version = 11) {
  std::optional<HeadRefusal> r = CheckRequestHead(f, version);
  if (!r) return std::nullopt;
  CHECK_FALSE(r->message.empty());
  return r->kind;
}

Fields WithHost(std::string_view host = "edge.example.com") {
  Fields f;
  f.set(http::field::host, host);
  f.set(http::field::content_type, "application/json");
  return f;
}

}  // namespace

TEST_CASE("request head: HTTP/1.1 needs exactly one Host (RFC 9112 3.2)", "[headers][head]") {
  CHECK_FALSE(Refused(WithHost()));
  CHECK_FALSE(Refused(WithHost("127.0.0.1:8080")));
  CHECK_FALSE(Refused(WithHost("[2001:db8::1]:8443")));
  // An empty value is what a client sends when the target has no authority.
  CHECK_FALSE(Refused(WithHost("")));

  Fields none;
  none.set(http::field::content_type, "application/json");
  CHECK(Refused(none, 11) == ErrorKind::kBadRequest);
  CHECK_FALSE(Refused(none, 10));  // HTTP/1.0 has no Host requirement

  Fields two = WithHost();
  two.insert(http::field::host, "other.example.com");
  CHECK(Refused(two, 11) == ErrorKind::kBadRequest);
  CHECK(Refused(two, 10) == ErrorKind::kBadRequest);  // "more than one" holds for any version
  Fields same_twice = WithHost();
  same_twice.insert(http::field::host, "edge.example.com");
  CHECK(Refused(same_twice) == ErrorKind::kBadRequest);
}

TEST_CASE("request head: a Host value that is not host[:port] is refused", "[headers][head]") {
  for (std::string_view bad : {"user@edge.example.com", "edge.example.com/v1", "a b", "[::1",
                               "edge.example.com:port", "edge.example.com?x", "edge#frag"}) {
    INFO(bad);
    CHECK(Refused(WithHost(bad)) == ErrorKind::kBadRequest);
  }
}

TEST_CASE("request head: a Host of plain characters is checked like any other", "[headers][head]") {
  // Unreserved characters with an optional port of digits pass without a
  // parse; anything else (a second ':', a port with a letter) still meets it.
  for (std::string_view good : {"a_b~c-d.example", "edge.example.com:", ":8080", "10.0.0.1:0"})
    CHECK_FALSE(Refused(WithHost(good)));
  for (std::string_view bad : {"edge.example.com:80:90", "edge.example.com:8a", "h:80@x"}) {
    INFO(bad);
    CHECK(Refused(WithHost(bad)) == ErrorKind::kBadRequest);
  }
}

TEST_CASE("request head: a repeated Authorization or x-geogate-residency is refused",
          "[headers][head]") {
  Fields one = WithHost();
  one.set(http::field::authorization, "Bearer k1");
  one.set("x-geogate-residency", "EU");
  CHECK_FALSE(Refused(one));

  Fields auth = one;
  auth.insert(http::field::authorization, "Bearer k2");
  CHECK(Refused(auth) == ErrorKind::kBadRequest);

  Fields residency = one;
  residency.insert("X-Geogate-Residency", "US");  // field names are case-insensitive
  CHECK(Refused(residency) == ErrorKind::kBadResidencyHeader);
  Fields residency_same = one;
  residency_same.insert("x-geogate-residency", "EU");
  CHECK(Refused(residency_same) == ErrorKind::kBadResidencyHeader);

  // Fields that may repeat stay accepted.
  Fields xff = one;
  xff.insert("X-Forwarded-For", "203.0.113.9");
  xff.insert("X-Forwarded-For", "198.51.100.2");
  CHECK_FALSE(Refused(xff));
}
