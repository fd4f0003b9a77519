// TableReader and the did-you-mean matcher (config/toml_reader.h).
#include <catch2/catch.hpp>

#include "config/toml_reader.h"

namespace geogate::config {
namespace {

TEST_CASE("ClosestMatch suggests near typos only", "[config][toml_reader]") {
  std::vector<std::string> keys = {"interval_ms", "timeout_ms", "path", "healthy_threshold",
                                   "unhealthy_threshold"};
  CHECK(ClosestMatch("intervall_ms", keys) == "interval_ms");
  CHECK(ClosestMatch("interval", keys) == "interval_ms");
  CHECK(ClosestMatch("timeuot_ms", keys) == "timeout_ms");  // swapped letters
  CHECK(ClosestMatch("PATH", keys) == "path");              // case
  CHECK(ClosestMatch("healthy_treshold", keys) == "healthy_threshold");
  CHECK(ClosestMatch("frobnicate", keys).empty());
  CHECK(ClosestMatch("x", {"y"}).empty());
  CHECK(ClosestMatch("anything", {}).empty());
}

TEST_CASE("TableReader reads typed values with positions", "[config][toml_reader]") {
  toml::table root = toml::parse(std::string_view("s = \"v\"\ni = 7\nf = 1.5\nb = true\n"),
                                 std::string_view("t.toml"));
  Diagnostics diag("t.toml");
  TableReader t(root, "", false, diag);
  auto s = t.String("s");
  REQUIRE(s);
  CHECK(s->value == "v");
  CHECK(s->pos.line == 1);
  CHECK(s->pos.column == 5);
  auto i = t.Integer("i", 0, 10);
  REQUIRE(i);
  CHECK(i->value == 7);
  CHECK(i->pos.line == 2);
  auto f = t.Number("f", 0, 2);
  REQUIRE(f);
  CHECK(f->value == 1.5);
  auto b = t.Bool("b");
  REQUIRE(b);
  CHECK(b->value);
  CHECK_FALSE(t.String("absent"));
  t.ReportUnknownKeys();
  CHECK_FALSE(diag.has_errors());

  // A required key that is absent is reported at the table.
  CHECK_FALSE(t.String("needed", Presence::kRequired));
  auto errors = diag.TakeErrors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].message == "missing required key 'needed'");
}

TEST_CASE("TableReader labels nested and array tables", "[config][toml_reader]") {
  toml::table root =
      toml::parse(std::string_view("[[a.b]]\nc = { d = 1 }\n"), std::string_view("t.toml"));
  Diagnostics diag("t.toml");
  TableReader top(root, "", false, diag);
  auto a = top.Table("a");
  REQUIRE(a);
  CHECK(a->label() == "[a]");
  auto elements = a->TableArray("b");
  REQUIRE(elements.size() == 1);
  CHECK(elements[0].label() == "[[a.b]]");
  auto c = elements[0].Table("c");
  REQUIRE(c);
  CHECK(c->label() == "[a.b.c]");
  CHECK(c->Describe("d") == "'d' in [a.b.c]");
  c->ReportUnknownKeys();
  auto errors = diag.TakeErrors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].message == "unknown key 'd' in [a.b.c]");
  CHECK(errors[0].line == 2);
  CHECK(errors[0].column == 7);
}

TEST_CASE("Diagnostics orders errors by position, whole-file first", "[config][toml_reader]") {
  Diagnostics diag("f");
  diag.Error(Pos{3, 1}, "c");
  diag.Error(Pos{1, 9}, "b");
  diag.Error(Pos{0, 0}, "a");
  diag.Error(Pos{1, 2}, "b0");
  auto errors = diag.TakeErrors();
  REQUIRE(errors.size() == 4);
  CHECK(errors[0].ToString() == "f: a");
  CHECK(errors[1].ToString() == "f:1:2: b0");
  CHECK(errors[2].ToString() == "f:1:9: b");
  CHECK(errors[3].ToString() == "f:3:1: c");
}

}  // namespace
}  // namespace geogate::config
