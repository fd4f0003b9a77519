// [showback] and [capacity]: defaults, ranges, the file path and unknown keys.
#include <catch2/catch.hpp>

#include "config/loader.h"
#include "config_test_util.h"

namespace geogate::config {
namespace {

using testing::HasError;
using testing::Load;
using testing::TempDir;

TEST_CASE("showback and capacity defaults", "[config][showback]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
)");
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->showback.file.empty());
  CHECK(r.snapshot->showback.window_hours == 168);
  CHECK(r.snapshot->capacity.target_utilization == Approx(0.70));
  CHECK(r.snapshot->capacity.sample_interval == Millis(1000));
}

TEST_CASE("showback and capacity keys as written", "[config][showback]") {
  TempDir dir;
  std::string config = dir.Write("etc/geogate.toml", testing::Toml(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[showback]
file = "showback.jsonl"
window_hours = 8760
[capacity]
target_utilization = 1
sample_interval_ms = 250
)"));
  LoadResult r = LoadFile(config, testing::FakeEnv());
  INFO(testing::Describe(r));
  REQUIRE(r.ok());
  CHECK(r.snapshot->showback.file == (dir.path() / "etc/showback.jsonl").string());
  CHECK(r.snapshot->showback.window_hours == 8760);
  CHECK(r.snapshot->capacity.target_utilization == 1.0);
  CHECK(r.snapshot->capacity.sample_interval == Millis(250));
}

TEST_CASE("showback and capacity ranges", "[config][showback]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[showback]
window_hours = 0
[capacity]
target_utilization = 0
sample_interval_ms = 99
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 16, "'window_hours' in [showback] must be between 1 and 8760, got 0"));
  CHECK(HasError(r, 6, 22,
                 "'target_utilization' in [capacity] must be greater than 0 and at most 1, got 0"));
  CHECK(HasError(r, 7, 22, "'sample_interval_ms' in [capacity] must be between 100 and 60000"));
  CHECK(r.errors.size() == 3);

  r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[showback]
window_hours = 8761
[capacity]
target_utilization = 1.01
sample_interval_ms = 60001
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 16, "must be between 1 and 8760, got 8761"));
  CHECK(HasError(r, 6, 22, "must be greater than 0 and at most 1, got 1.01"));
  CHECK(HasError(r, 7, 22, "must be between 100 and 60000, got 60001"));
  CHECK(r.errors.size() == 3);
}

TEST_CASE("showback file: stdout is refused and the directory must exist", "[config][showback]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[showback]
file = "-"
)");
  REQUIRE_ONLY_ERROR(r, 4, 8, "'file' in [showback] must be a file path or \"\"");

  r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[showback]
file = "no/such/dir/showback.jsonl"
)");
  REQUIRE_ONLY_ERROR(r, 4, 8, "of showback file does not exist");
}

TEST_CASE("unknown keys in showback and capacity", "[config][showback]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[showback]
window = 24
[capacity]
target = 0.5
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 1, "unknown key 'window' in [showback]"));
  CHECK(HasError(r, 6, 1, "unknown key 'target' in [capacity]"));
  CHECK(r.errors.size() == 2);
}

TEST_CASE("wrong types in showback and capacity", "[config][showback]") {
  LoadResult r = Load(R"(
[[gateway.listeners]]
address = "127.0.0.1:0"
[showback]
file = 3
window_hours = 1.5
[capacity]
target_utilization = "high"
)");
  INFO(testing::Describe(r));
  CHECK(HasError(r, 4, 8, "'file' in [showback] must be a string"));
  CHECK(HasError(r, 5, 16, "'window_hours' in [showback] must be an integer"));
  CHECK(HasError(r, 7, 22, "'target_utilization' in [capacity] must be a number"));
  CHECK(r.errors.size() == 3);
}

}  // namespace
}  // namespace geogate::config
