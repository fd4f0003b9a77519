#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "proxy/request_target.h"

using geogate::proxy::ModelIdOfTarget;
using geogate::proxy::NormalizeRequestTarget;
using geogate::proxy::RequestTarget;

namespace {

struct Outcome {
  bool ok;
  std::string path;
  std::string target;
  std::string error;
};

Outcome Run(std::string_view target) {
  std::string storage;
  RequestTarget t = NormalizeRequestTarget(target, storage);
  return {t.ok, std::string(t.path), std::string(t.target), std::string(t.error)};
}

bool PointsInto(std::string_view view, std::string_view whole) {
  return view.data() >= whole.data() && view.data() + view.size() <= whole.data() + whole.size();
}

}  // namespace

TEST_CASE("request target: an ordinary path is used as it is, without a copy",
          "[gateway][target]") {
  for (std::string_view target : {"/v1/chat/completions", "/v1/models", "/v1/embeddings",
                                  "/v1/completions", "/v1/chat/completions?stream=true",
                                  "/v1/models?", "/admin/backends", "/", "/v1//chat/completions"}) {
    CAPTURE(target);
    std::string storage;
    RequestTarget t = NormalizeRequestTarget(target, storage);
    REQUIRE(t.ok);
    CHECK(t.target == target);
    CHECK(t.path == target.substr(0, target.find('?')));
    CHECK(PointsInto(t.target, target));
    CHECK(PointsInto(t.path, target));
    CHECK(storage.empty());
  }
}

TEST_CASE("request target: unreserved characters alone do not skip dot-segment removal",
          "[gateway][target]") {
  // The copy-free path takes only targets of unreserved characters and '/'
  // without a "/.": a trailing or inner dot segment is still removed.
  CHECK(Run("/v1/chat/x/..").path == "/v1/chat/");
  CHECK(Run("/v1/chat/./completions").path == "/v1/chat/completions");
  Outcome dotted = Run("/v1/a.b/c~d_e-f");
  REQUIRE(dotted.ok);
  CHECK(dotted.target == "/v1/a.b/c~d_e-f");
  CHECK(Run("/v1/.well-known").path == "/v1/.well-known");
}

TEST_CASE("request target: dot segments inside /v1/ are removed", "[gateway][target]") {
  struct Case {
    std::string_view in, path;
  };
  for (Case c : {
           Case{"/v1/./chat/completions", "/v1/chat/completions"},
           Case{"/v1/x/../chat/completions", "/v1/chat/completions"},
           Case{"/v1/a/b/../../chat/./completions", "/v1/chat/completions"},
           Case{"/v1/models/.", "/v1/models/"},
           Case{"/v1/chat/completions/..", "/v1/chat/"},
           Case{"/v1/x/..", "/v1/"},
           Case{"/v1/.", "/v1/"},
           Case{"/v1/../v1/models", "/v1/models"},
           Case{"/x/../v1/models", "/v1/models"},
           Case{"/./v1/models", "/v1/models"},
           // Not dot segments: left alone.
           Case{"/v1/.well-known/x", "/v1/.well-known/x"},
           Case{"/v1/.../x", "/v1/.../x"},
           Case{"/v1/..a/x", "/v1/..a/x"},
           Case{"/v1/a./b", "/v1/a./b"},
       }) {
    CAPTURE(c.in);
    std::string storage;
    RequestTarget t = NormalizeRequestTarget(c.in, storage);
    REQUIRE(t.ok);
    CHECK(t.path == c.path);
    CHECK(t.target == c.path);
  }
}

TEST_CASE("request target: the query is kept as sent after a normalised path",
          "[gateway][target]") {
  Outcome o = Run("/v1/x/../chat/completions?a=%2e%2E&b=/../c&d=%00");
  REQUIRE(o.ok);
  CHECK(o.path == "/v1/chat/completions");
  CHECK(o.target == "/v1/chat/completions?a=%2e%2E&b=/../c&d=%00");
  // An empty query stays an empty query.
  o = Run("/v1/./models?");
  REQUIRE(o.ok);
  CHECK(o.path == "/v1/models");
  CHECK(o.target == "/v1/models?");
  // Dots and encodings in the query alone need no normalisation.
  std::string storage;
  std::string_view sent = "/v1/models?x=/../%2e";
  RequestTarget t = NormalizeRequestTarget(sent, storage);
  REQUIRE(t.ok);
  CHECK(t.target == sent);
  CHECK(storage.empty());
}

TEST_CASE("request target: percent-encoding is normalised (unreserved decoded, hex upper case)",
          "[gateway][target]") {
  struct Case {
    std::string_view in, path;
  };
  for (Case c : {
           Case{"/v1/%63hat/completions", "/v1/chat/completions"},
           Case{"/v1/%7e", "/v1/~"},
           Case{"/v1/a%3fb", "/v1/a%3Fb"},
           Case{"/v1/a%23b", "/v1/a%23b"},
           Case{"/v1/a%20b", "/v1/a%20b"},
       }) {
    CAPTURE(c.in);
    Outcome o = Run(c.in);
    REQUIRE(o.ok);
    CHECK(o.path == c.path);
  }
}

TEST_CASE("request target: a path that leaves /v1/ is refused", "[gateway][target]") {
  for (std::string_view target : {
           "/v1/../admin/backends",
           "/v1/../metrics",
           "/v1/..",
           "/v1/../",
           "/v1/../../../etc/passwd",
           "/v1/chat/../../admin/reload",
           "/v1/./../readyz?x=1",
           "/v1/..//v1/models",  // would start with "//": an authority on re-parse
           "/..",
           "/../v1/models",  // above the root: not under /v1/ either
           "/./admin/backends",
           "/admin/%62ackends",
       }) {
    CAPTURE(target);
    Outcome o = Run(target);
    CHECK_FALSE(o.ok);
    CHECK_THAT(o.error, Catch::Contains("outside /v1/"));
  }
}

TEST_CASE("request target: encoded '/', '.' and NUL are refused in any case", "[gateway][target]") {
  for (std::string_view target : {
           "/v1/%2e%2e/metrics",
           "/v1/%2E%2E/metrics",
           "/v1/%2e%2E/metrics",
           "/v1/.%2e/admin/backends",
           "/v1/%2e/chat/completions",
           "/v1/a%2eb",
           "/v1/chat%2fcompletions",
           "/v1/chat%2Fcompletions",
           "/v1/..%2f..%2fadmin",
           "/v1/chat/completions%00",
           "/v1/chat%00.json",
           "/v1/models%2F",
       }) {
    CAPTURE(target);
    Outcome o = Run(target);
    CHECK_FALSE(o.ok);
    CHECK_THAT(o.error, Catch::Contains("encoded"));
  }
  // Near misses are not encodings of those three.
  for (std::string_view target : {"/v1/a%2db", "/v1/a%20b", "/v1/a%3Ab", "/v1/a%01b"}) {
    CAPTURE(target);
    CHECK(Run(target).ok);
  }
}

TEST_CASE("request target: a fragment is refused", "[gateway][target]") {
  for (std::string_view target : {"/v1/chat/completions#x", "/v1/chat/completions#",
                                  "/v1/models?a=b#c", "/v1/../admin#x", "/v1/#/../admin"}) {
    CAPTURE(target);
    Outcome o = Run(target);
    CHECK_FALSE(o.ok);
    CHECK_THAT(o.error, Catch::Contains("fragment"));
  }
}

TEST_CASE("request target: what is not an origin-form path is refused", "[gateway][target]") {
  Outcome o = Run("http://example.com/v1/chat/completions");
  CHECK_FALSE(o.ok);
  CHECK_THAT(o.error, Catch::Contains("not a forward proxy"));
  CHECK_FALSE(Run("*").ok);
  CHECK_FALSE(Run("").ok);
  CHECK_FALSE(Run("example.com:443").ok);
  for (std::string_view target : {"/v1/%zz", "/v1/%2", "/v1/%", "/v1/a b", "/v1/a\"b", "/v1/a<b>",
                                  "/v1/a\\b", "/v1/a{b}", "/v1/a|b", "/v1/\x80"}) {
    CAPTURE(target);
    o = Run(target);
    CHECK_FALSE(o.ok);
    CHECK_THAT(o.error, Catch::Contains("not a valid path"));
  }
}

TEST_CASE("request target: the result is stable (normalising twice changes nothing)",
          "[gateway][target]") {
  for (std::string_view target :
       {"/v1/x/../chat/completions?q=1", "/v1/./a/./b/../c", "/v1/%7e/./x", "/x/../v1/models"}) {
    CAPTURE(target);
    Outcome once = Run(target);
    REQUIRE(once.ok);
    std::string storage;
    RequestTarget twice = NormalizeRequestTarget(once.target, storage);
    REQUIRE(twice.ok);
    CHECK(twice.target == once.target);
    CHECK(storage.empty());  // already normal: no second copy
  }
}

TEST_CASE("model id of a /v1/models/{id} target: decoded, one segment", "[gateway][target]") {
  CHECK(ModelIdOfTarget("/v1/models/llama-3.1-8b") == "llama-3.1-8b");
  // What the OpenAI SDK sends for an id with a '/': the '/' encoded.
  CHECK(ModelIdOfTarget("/v1/models/meta-llama%2FLlama-3.1-8B") == "meta-llama/Llama-3.1-8B");
  CHECK(ModelIdOfTarget("/v1/models/meta-llama%2fLlama-3.1-8B") == "meta-llama/Llama-3.1-8B");
  CHECK(ModelIdOfTarget("/v1/models/a%20b?x=1") == "a b");
  // Not a models.retrieve target.
  CHECK_FALSE(ModelIdOfTarget("/v1/models"));
  CHECK_FALSE(ModelIdOfTarget("/v1/models/"));
  CHECK_FALSE(ModelIdOfTarget("/v1/chat/completions"));
  CHECK_FALSE(ModelIdOfTarget("/v1/models/a/b"));  // a raw '/': two segments
  CHECK_FALSE(ModelIdOfTarget("/v1/models/.."));
  CHECK_FALSE(ModelIdOfTarget("/v1/models/."));
  CHECK_FALSE(ModelIdOfTarget("/v1/models/%2E%2E"));
  CHECK_FALSE(ModelIdOfTarget("/v1/models/a%00b"));
  CHECK_FALSE(ModelIdOfTarget("/v1/models/a%zz"));  // not a valid escape
  CHECK_FALSE(ModelIdOfTarget("/v1/models/x#frag"));
}
