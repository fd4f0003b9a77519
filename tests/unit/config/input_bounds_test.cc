// What reaches toml++ is bounded: file size and nesting depth. toml++ builds
// (and destroys) nested tables recursively, so a 100 KB file with a dotted
// key of 50,000 parts used to overflow the stack of --check, SIGHUP and
// POST /admin/reload (issue #18, item 2). These files must be refused with
// a position instead.
#include <string>

#include <catch2/catch.hpp>

#include "config/input_bounds.h"
#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

using testing::HasError;
using testing::Load;
using testing::TempDir;

constexpr std::string_view kListener = "[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\n";

std::string Repeat(std::string_view part, size_t n, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i != 0) out += sep;
    out += part;
  }
  return out;
}

std::string WithListener(std::string_view rest) {
  return std::string(kListener) + std::string(rest);
}

/// `text` at the top of the document (line 1, depth 0), the listener after it.
std::string ThenListener(std::string_view text) {
  return std::string(text) + std::string(kListener);
}

TEST_CASE("a dotted key of 50,000 parts is refused at the key, not a crash", "[config][bounds]") {
  // python3 -c "print('.'.join(['a']*50000)+' = 1')", the file of the issue.
  std::string text = ThenListener(Repeat("a", 50000, ".") + " = 1\n");
  LoadResult r = LoadString(text, "test.toml", "/nonexistent", testing::FakeEnv());
  REQUIRE_ONLY_ERROR(r, 1, 1, "nested 50000 levels deep");
  CHECK_THAT(r.errors[0].message, Catch::Matchers::Contains("at most 32"));
}

TEST_CASE("LoadFile refuses the same file from disk", "[config][bounds]") {
  TempDir dir;
  std::string path = dir.Write("deep.toml", ThenListener(Repeat("a", 50000, ".") + " = 1\n"));
  LoadResult r = LoadFile(path, testing::FakeEnv());
  REQUIRE_ONLY_ERROR(r, 1, 1, "nested");
  CHECK(r.errors[0].ToString().rfind(path + ":1:1: ", 0) == 0);
}

TEST_CASE("deep table headers, in any spelling, are refused", "[config][bounds]") {
  SECTION("a table header") {
    REQUIRE_ONLY_ERROR(Load(ThenListener("[" + Repeat("a", 40, ".") + "]\n")), 1, 1, "nested 40");
  }
  SECTION("an array-of-tables header counts the array") {
    REQUIRE_ONLY_ERROR(Load(ThenListener("[[" + Repeat("a", 32, ".") + "]]\n")), 1, 1, "nested 33");
  }
  SECTION("quoted parts and spaces around the dots") {
    REQUIRE_ONLY_ERROR(Load(ThenListener(Repeat("\"a.b\"", 20, " . ") + " . " +
                                         Repeat("'c'", 20, ".") + " = 1\n")),
                       1, 1, "nested 40");
  }
  SECTION("a header plus the keys below it") {
    REQUIRE_ONLY_ERROR(
        Load(ThenListener("[" + Repeat("a", 20, ".") + "]\n" + Repeat("b", 20, ".") + " = 1\n")), 2,
        1, "nested 40");
  }
  SECTION("each array of tables on the header's path counts") {
    // [a.b] below [[a]] is a table in a's last element, so a key of 30 parts
    // under it sits 33 levels down; the fuzz target found this (it used to
    // pass the scan as 32).
    REQUIRE_ONLY_ERROR(Load(ThenListener("[[a]]\n[a.b]\n" + Repeat("c", 30, ".") + " = 1\n")), 3, 1,
                       "nested 33");
    REQUIRE_ONLY_ERROR(Load(ThenListener("[[a]]\n[[a.b]]\n" + Repeat("c", 29, ".") + " = 1\n")), 3,
                       1, "nested 33");
    // [[a]], [[a.a]], [[a.a.a]]...: a header of n parts is 2n levels deep.
    std::string headers;
    for (size_t n = 1; n <= 17; ++n)
      headers += "[[" + Repeat("a", n, ".") + "]]\n";
    REQUIRE_ONLY_ERROR(Load(ThenListener(headers)), 17, 1, "nested 34");
  }
  SECTION("digits only, which look like a float") {
    REQUIRE_ONLY_ERROR(Load(ThenListener(Repeat("1", 100, ".") + " = 1\n")), 1, 1, "nested 100");
  }
}

TEST_CASE("deep values are refused where they get too deep", "[config][bounds]") {
  SECTION("nested arrays over several lines") {
    REQUIRE_ONLY_ERROR(Load(ThenListener("x = " + Repeat("[", 40, "\n") + "\n")), 33, 1,
                       "nested 33");
  }
  SECTION("inline tables with dotted keys inside an array") {
    std::string v;
    for (int i = 0; i < 10; ++i)
      v += "[\n{ " + Repeat("k", 5, ".") + " = ";
    REQUIRE_ONLY_ERROR(Load(ThenListener("x = " + v + "1\n")), 7, 3, "nested 37");
  }
}

TEST_CASE("dots and brackets inside strings and comments do not count", "[config][bounds]") {
  std::string many_dots = Repeat("a", 200, ".");
  std::string brackets = Repeat("[{", 200, "");
  LoadResult r = Load(WithListener("[gateway] # " + many_dots + brackets + "\n" +  //
                                   "edge = \"" + many_dots + brackets + "\"\n" +
                                   "# '''\n"
                                   "access_log = '''\n" +
                                   many_dots + "\n" + brackets + "\n\"\"\" '' '''\n" +
                                   "[geo]\n"
                                   "unknown = \"\"\"a\\\"\"\"" +
                                   brackets +
                                   "\n\\\"\"\" \"\"\"\"\n"
                                   "country_field = 'x'\n"
                                   "[[regions]]\n"
                                   "name = 'r'\n"
                                   "jurisdiction = \"E\\\"U\"\n"
                                   "location = { lat = 1.5, lon = -2.25 }\n"));
  // Reaches validation: only the values themselves are wrong, nothing is
  // refused as too deep.
  INFO(testing::Describe(r));
  for (const auto& e : r.errors)
    CHECK(e.message.find("nested") == std::string::npos);
  CHECK(HasError(r, 4, 8, "'edge' in [gateway] must be a non-empty name"));
  CHECK(HasError(r, 16, 16, "jurisdiction"));
}

TEST_CASE("the depth bound is exactly kMaxNestingDepth", "[config][bounds]") {
  CHECK_FALSE(CheckInputBounds("[[gateway.listeners]]\ntls = { cert = 'a', key = 'b' }\n"));
  CHECK_FALSE(CheckInputBounds(Repeat("a", kMaxNestingDepth, ".") + " = 1\n"));
  CHECK(CheckInputBounds(Repeat("a", kMaxNestingDepth + 1, ".") + " = 1\n"));
}

TEST_CASE("a config file larger than the limit is refused before it is parsed",
          "[config][bounds]") {
  TempDir dir;
  std::string text = WithListener("# ");
  text.append(kMaxConfigBytes, 'x');
  std::string path = dir.Write("huge.toml", text + "\n");
  LoadResult r = LoadFile(path, testing::FakeEnv());
  REQUIRE_ONLY_ERROR(r, 0, 0, "larger than 16 MiB");
  r = LoadString(text, "test.toml", "/nonexistent", testing::FakeEnv());
  REQUIRE_ONLY_ERROR(r, 0, 0, "larger than 16 MiB");
}

}  // namespace
}  // namespace geogate::config
