// The process-wide store: retention, merging, the JSON-lines file, replay
// (torn and malformed lines), rotation and month-to-date spend.
#include <filesystem>

#include <catch2/catch.hpp>

#include "absl/strings/str_split.h"
#include "accounting/showback_line.h"
#include "accounting/showback_store.h"
#include "showback_test_util.h"

namespace geogate::accounting {
namespace {

using testing::Ms;

ShowbackBucket Bucket(int64_t minute_ms, std::string tenant, double cost,
                      std::string backend = "eu-h100-r1") {
  ShowbackBucket b;
  b.minute_ms = minute_ms;
  b.dims = {std::move(tenant), "llama-70b", "eu-west",         "H100",
            "provider-a",      "reserved",  std::move(backend)};
  b.usage.requests = 2;
  b.usage.estimated_requests = 1;
  b.usage.reported_prompt_tokens = 100;
  b.usage.reported_completion_tokens = 200;
  b.usage.estimated_prompt_tokens = 0;
  b.usage.estimated_completion_tokens = 50;
  b.usage.gpu_seconds = cost * 1000;
  b.usage.cost = cost;
  return b;
}

ShowbackQuery All() {
  ShowbackQuery q;
  q.from_ms = 0;
  q.to_ms = Ms("2100-01-01T00:00:00Z");
  return q;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view l : absl::StrSplit(text, '\n', absl::SkipEmpty()))
    out.emplace_back(l.data(), l.size());
  return out;
}

const int64_t kNow = Ms("2025-03-10T12:00:30Z");

TEST_CASE("the store keeps window_hours of buckets in memory", "[showback][store]") {
  ShowbackStore store;
  REQUIRE(store.Open({"", 1, "fra1"}, kNow).ok());
  store.Append(
      {Bucket(Ms("2025-03-10T10:59:00Z"), "acme", 1), Bucket(Ms("2025-03-10T11:00:00Z"), "acme", 2),
       Bucket(Ms("2025-03-10T11:59:00Z"), "acme", 4)},
      kNow);
  // The window is the hour before the current minute: 11:00 stays, 10:59 goes.
  CHECK(store.Query(All()).totals.cost == 6);
  CHECK(store.stats().buckets == 2);
  CHECK(store.stats().oldest_minute_ms == Ms("2025-03-10T11:00:00Z"));

  store.Append({}, Ms("2025-03-10T12:30:00Z"));  // a tick with nothing closed still prunes
  CHECK(store.Query(All()).totals.cost == 4);

  // A reload to a shorter window drops at once; a longer one brings nothing back.
  REQUIRE(store.Configure({"", 1, "fra1"}, Ms("2025-03-10T13:00:00Z")).ok());
  CHECK(store.Query(All()).totals.cost == 0);
  CHECK(store.stats().buckets == 0);
}

TEST_CASE("buckets of one key from several workers become one line", "[showback][store]") {
  testing::TempDir dir;
  std::string file = dir.File("showback.jsonl");
  ShowbackStore store;
  auto replay = store.Open({file, 168, "fra1"}, kNow);
  REQUIRE(replay.ok());
  CHECK(replay->lines == 0);  // a missing file is empty, and now created
  CHECK(std::filesystem::exists(file));

  int64_t m = Ms("2025-03-10T11:59:00Z");
  store.Append({Bucket(m, "acme", 1), Bucket(m, "beta", 8), Bucket(m, "acme", 2)}, kNow);
  auto lines = Lines(testing::ReadAll(file));
  REQUIRE(lines.size() == 2);
  auto acme = ParseShowbackLine(lines[0]);
  REQUIRE(acme.ok());
  CHECK(acme->dims[0] == "acme");
  CHECK(acme->usage.cost == 3);
  CHECK(acme->usage.requests == 4);
  CHECK(store.stats().lines_written == 2);
  CHECK(store.stats().buckets == 2);
  // Memory merges the same way, also with a later straggler of the minute.
  store.Append({Bucket(m, "acme", 4)}, kNow);
  CHECK(store.stats().buckets == 2);
  CHECK(Lines(testing::ReadAll(file)).size() == 3);
  CHECK(store.Query(All()).totals.cost == 15);
}

TEST_CASE("the line format is exact and round-trips", "[showback][store]") {
  ShowbackBucket b = Bucket(Ms("2025-03-10T11:59:00Z"), "a\"cme", 0.00032421875);
  std::string line;
  AppendShowbackLine(b, "fra1", line);
  CHECK(line ==
        R"({"v":1,"minute":"2025-03-10T11:59:00Z","unix_ms":1741607940000,"edge":"fra1",)"
        R"("tenant":"a\"cme","model":"llama-70b","region":"eu-west","gpu":"H100",)"
        R"("provider":"provider-a","tier":"reserved","backend":"eu-h100-r1","requests":2,)"
        R"("estimated_requests":1,"reported_prompt_tokens":100,"reported_completion_tokens":200,)"
        R"("estimated_prompt_tokens":0,"estimated_completion_tokens":50,)"
        R"("gpu_seconds":0.32421875,"cost":0.00032421875})"
        "\n");
  line.pop_back();
  auto back = ParseShowbackLine(line);
  REQUIRE(back.ok());
  CHECK(back->minute_ms == b.minute_ms);
  CHECK(back->dims == b.dims);
  CHECK(back->usage.requests == b.usage.requests);
  CHECK(back->usage.estimated_completion_tokens == 50);
  CHECK(back->usage.cost == Approx(b.usage.cost).epsilon(1e-15));
  CHECK(back->usage.gpu_seconds == Approx(b.usage.gpu_seconds).epsilon(1e-15));
}

TEST_CASE("malformed lines are refused with a reason", "[showback][store]") {
  CHECK_FALSE(ParseShowbackLine("not json").ok());
  CHECK_FALSE(ParseShowbackLine("[1,2]").ok());
  CHECK(ParseShowbackLine(R"({"v":2})").status().message().find("\"v\"") != std::string::npos);
  std::string good;
  AppendShowbackLine(Bucket(0, "acme", 1), "e", good);
  good.pop_back();
  CHECK(ParseShowbackLine(good).ok());
  std::string negative = good;
  negative.replace(negative.find("\"cost\":1"), 8, "\"cost\":-1");
  CHECK(ParseShowbackLine(negative).status().message() == "missing or negative \"cost\"");
  std::string no_tenant = good;
  no_tenant.replace(no_tenant.find("\"tenant\""), 8, "\"tenant_\"");
  CHECK(ParseShowbackLine(no_tenant).status().message() == "missing or non-string \"tenant\"");
  // Fields a newer writer adds are ignored.
  std::string extra = good;
  extra.insert(extra.size() - 1, ",\"region_label\":\"x\"");
  CHECK(ParseShowbackLine(extra).ok());
}

TEST_CASE("a restart replays the file and loses nothing written", "[showback][store]") {
  testing::TempDir dir;
  std::string file = dir.File("showback.jsonl");
  {
    ShowbackStore store;
    REQUIRE(store.Open({file, 168, "fra1"}, kNow).ok());
    store.Append({Bucket(Ms("2025-03-10T11:58:00Z"), "acme", 1),
                  Bucket(Ms("2025-03-10T11:59:00Z"), "beta", 2)},
                 kNow);
  }
  ShowbackStore again;
  auto replay = again.Open({file, 168, "fra1"}, kNow);
  REQUIRE(replay.ok());
  CHECK(replay->lines == 2);
  CHECK(replay->loaded == 2);
  CHECK(replay->malformed == 0);
  CHECK_FALSE(replay->torn_tail);
  ShowbackResult r = again.Query(All());
  CHECK(r.totals.cost == 3);
  CHECK(r.totals.requests == 4);
  CHECK(r.totals.estimated_completion_tokens == 100);
}

TEST_CASE("a torn last line is skipped and the next append starts a new line",
          "[showback][store]") {
  testing::TempDir dir;
  std::string file = dir.File("showback.jsonl");
  std::string text;
  AppendShowbackLine(Bucket(Ms("2025-03-10T11:57:00Z"), "acme", 1), "fra1", text);
  AppendShowbackLine(Bucket(Ms("2025-03-10T11:58:00Z"), "acme", 2), "fra1", text);
  std::string torn;
  AppendShowbackLine(Bucket(Ms("2025-03-10T11:59:00Z"), "acme", 4), "fra1", torn);
  text += torn.substr(0, torn.size() / 2);  // the crash hit mid-write
  testing::WriteAll(file, text);

  ShowbackStore store;
  auto replay = store.Open({file, 168, "fra1"}, kNow);
  REQUIRE(replay.ok());
  CHECK(replay->lines == 3);
  CHECK(replay->loaded == 2);
  CHECK(replay->malformed == 1);
  CHECK(replay->torn_tail);
  CHECK(replay->first_error.rfind("line 3: not JSON", 0) == 0);
  CHECK(store.Query(All()).totals.cost == 3);

  store.Append({Bucket(Ms("2025-03-10T12:00:00Z"), "acme", 8)}, Ms("2025-03-10T12:01:00Z"));
  std::string after = testing::ReadAll(file);
  CHECK(after.substr(0, text.size()) == text);
  CHECK(after[text.size()] == '\n');  // the fragment stays a line of its own
  CHECK(store.stats().lines_written == 1);

  ShowbackStore third;
  auto replay3 = third.Open({file, 168, "fra1"}, Ms("2025-03-10T12:01:00Z"));
  REQUIRE(replay3.ok());
  CHECK(replay3->loaded == 3);
  CHECK(replay3->malformed == 1);
  CHECK_FALSE(replay3->torn_tail);
  CHECK(third.Query(All()).totals.cost == 11);
}

TEST_CASE("a complete last line without its newline still counts", "[showback][store]") {
  testing::TempDir dir;
  std::string file = dir.File("showback.jsonl");
  std::string text;
  AppendShowbackLine(Bucket(Ms("2025-03-10T11:58:00Z"), "acme", 1), "fra1", text);
  text.pop_back();
  testing::WriteAll(file, text);
  ShowbackStore store;
  auto replay = store.Open({file, 168, "fra1"}, kNow);
  REQUIRE(replay.ok());
  CHECK(replay->loaded == 1);
  CHECK_FALSE(replay->torn_tail);
  store.Append({Bucket(Ms("2025-03-10T11:59:00Z"), "acme", 2)}, kNow);
  auto lines = Lines(testing::ReadAll(file));
  REQUIRE(lines.size() == 2);
  CHECK(ParseShowbackLine(lines[0]).ok());
  CHECK(ParseShowbackLine(lines[1]).ok());
}

TEST_CASE("replay skips malformed lines, counts them, and keeps the window", "[showback][store]") {
  testing::TempDir dir;
  std::string file = dir.File("showback.jsonl");
  std::string text;
  AppendShowbackLine(Bucket(Ms("2025-03-01T00:00:00Z"), "acme", 16), "fra1", text);  // this month
  AppendShowbackLine(Bucket(Ms("2025-02-20T00:00:00Z"), "acme", 32), "fra1", text);  // last month
  text += "garbage\n\n{\"v\":9}\n";
  AppendShowbackLine(Bucket(Ms("2025-03-10T11:00:00Z"), "acme", 1), "fra1", text);
  AppendShowbackLine(Bucket(Ms("2025-03-10T11:30:00Z"), "", 2), "fra1", text);
  testing::WriteAll(file, text);

  ShowbackStore store;
  auto replay = store.Open({file, 24, "fra1"}, kNow);
  REQUIRE(replay.ok());
  CHECK(replay->lines == 6);  // the blank line is not a line
  CHECK(replay->malformed == 2);
  CHECK(replay->first_error.rfind("line 3: ", 0) == 0);
  CHECK(replay->outside_window == 2);
  CHECK(replay->loaded == 2);
  CHECK(store.Query(All()).totals.cost == 3);

  // Month-to-date spend reads every line of the month, inside the window or not.
  auto spend = store.MonthSpend(kNow);
  CHECK(spend["acme"] == 17);
  CHECK(spend[""] == 2);
  CHECK(store.MonthSpend(Ms("2025-02-28T00:00:00Z"))["acme"] == 32);
  store.Append({Bucket(Ms("2025-03-10T12:00:00Z"), "acme", 4)}, Ms("2025-03-10T12:01:00Z"));
  CHECK(store.MonthSpend(kNow)["acme"] == 21);
}

TEST_CASE("reopen follows log rotation and a reload can move the file", "[showback][store]") {
  testing::TempDir dir;
  std::string file = dir.File("showback.jsonl");
  ShowbackStore store;
  REQUIRE(store.Open({file, 168, "fra1"}, kNow).ok());
  store.Append({Bucket(Ms("2025-03-10T11:58:00Z"), "acme", 1)}, kNow);
  std::filesystem::rename(file, file + ".1");
  REQUIRE(store.Reopen().ok());
  store.Append({Bucket(Ms("2025-03-10T11:59:00Z"), "acme", 2)}, kNow);
  CHECK(Lines(testing::ReadAll(file + ".1")).size() == 1);
  CHECK(Lines(testing::ReadAll(file)).size() == 1);

  std::string moved = dir.File("moved.jsonl");
  REQUIRE(store.Configure({moved, 168, "fra1"}, kNow).ok());
  store.Append({Bucket(Ms("2025-03-10T12:00:00Z"), "acme", 4)}, Ms("2025-03-10T12:01:00Z"));
  CHECK(Lines(testing::ReadAll(moved)).size() == 1);
  CHECK(Lines(testing::ReadAll(file)).size() == 1);
  CHECK(store.Query(All()).totals.cost == 7);  // memory is kept across the move
}

TEST_CASE("an unwritable file is an error and the store keeps working in memory",
          "[showback][store]") {
  testing::TempDir dir;
  std::string file = dir.File("gone/showback.jsonl");  // its directory does not exist
  ShowbackStore store;
  auto replay = store.Open({file, 168, "fra1"}, kNow);
  CHECK_FALSE(replay.ok());
  store.Append({Bucket(Ms("2025-03-10T11:59:00Z"), "acme", 1)}, kNow);
  CHECK(store.stats().write_errors == 1);
  CHECK(store.stats().last_error.find("cannot open showback file") != std::string::npos);
  CHECK(store.Query(All()).totals.cost == 1);
  // Once the directory exists, the next tick opens it.
  std::filesystem::create_directories(dir.File("gone"));
  store.Append({Bucket(Ms("2025-03-10T12:00:00Z"), "acme", 2)}, Ms("2025-03-10T12:01:00Z"));
  CHECK(Lines(testing::ReadAll(file)).size() == 1);
}

}  // namespace
}  // namespace geogate::accounting
