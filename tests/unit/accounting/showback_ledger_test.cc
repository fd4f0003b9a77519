// The per-worker ledger: per-minute buckets, closing and snapshots.
#include <catch2/catch.hpp>

#include "accounting/showback_ledger.h"
#include "showback_test_util.h"

namespace geogate::accounting {
namespace {

using testing::Ms;

ShowbackRecord Rec(int64_t unix_ms, std::string tenant, std::string backend, double cost,
                   bool estimated = false) {
  ShowbackRecord r;
  r.unix_ms = unix_ms;
  r.tenant = std::move(tenant);
  r.model = "llama-70b";
  r.region = "eu-west";
  r.gpu = "H100";
  r.provider = "provider-a";
  r.tier = "reserved";
  r.backend = std::move(backend);
  r.prompt_tokens = 10;
  r.completion_tokens = 20;
  r.estimated = estimated;
  r.gpu_seconds = cost * 10;
  r.cost = cost;
  return r;
}

TEST_CASE("requests of one key in one minute share a bucket", "[showback][ledger]") {
  ShowbackLedger ledger;
  ledger.Add(Rec(Ms("2025-03-01T10:05:01Z"), "acme", "b1", 1));
  ledger.Add(Rec(Ms("2025-03-01T10:05:59.999Z"), "acme", "b1", 2, true));
  ledger.Add(Rec(Ms("2025-03-01T10:05:30Z"), "beta", "b1", 4));
  ledger.Add(Rec(Ms("2025-03-01T10:06:00Z"), "acme", "b1", 8));
  CHECK(ledger.size() == 3);

  auto open = ledger.Snapshot();
  CHECK(open.size() == 3);
  CHECK(ledger.size() == 3);  // a snapshot takes nothing

  // 10:05 closes at 10:06:00.000 sharp; 10:06 is still open.
  CHECK(ledger.TakeClosed(Ms("2025-03-01T10:05:59.999Z")).empty());
  auto closed = ledger.TakeClosed(Ms("2025-03-01T10:06:00Z"));
  REQUIRE(closed.size() == 2);
  CHECK(closed[0].minute_ms == Ms("2025-03-01T10:05:00Z"));
  CHECK(closed[0].dims[0] == "acme");  // ordered by minute, then key
  CHECK(closed[0].usage.requests == 2);
  CHECK(closed[0].usage.estimated_requests == 1);
  CHECK(closed[0].usage.reported_completion_tokens == 20);
  CHECK(closed[0].usage.estimated_completion_tokens == 20);
  CHECK(closed[0].usage.cost == 3);
  CHECK(closed[0].usage.gpu_seconds == 30);
  CHECK(closed[1].dims[0] == "beta");
  CHECK(closed[1].usage.cost == 4);
  CHECK(ledger.size() == 1);

  auto later = ledger.TakeClosed(Ms("2025-03-01T10:30:00Z"));
  REQUIRE(later.size() == 1);
  CHECK(later[0].minute_ms == Ms("2025-03-01T10:06:00Z"));
  CHECK(ledger.empty());
  CHECK(ledger.TakeClosed(Ms("2025-03-01T11:00:00Z")).empty());
}

TEST_CASE("each dimension splits buckets", "[showback][ledger]") {
  ShowbackLedger ledger;
  ShowbackRecord base = Rec(Ms("2025-03-01T10:05:01Z"), "acme", "b1", 1);
  ledger.Add(base);
  for (size_t d = 0; d < kShowbackDims; ++d) {
    ShowbackRecord r = base;
    std::string* fields[] = {&r.tenant,   &r.model, &r.region, &r.gpu,
                             &r.provider, &r.tier,  &r.backend};
    *fields[d] += "-other";
    ledger.Add(r);
  }
  CHECK(ledger.size() == 1 + kShowbackDims);
}

TEST_CASE("a late record for a taken minute comes out on the next take", "[showback][ledger]") {
  ShowbackLedger ledger;
  ledger.Add(Rec(Ms("2025-03-01T10:05:10Z"), "acme", "b1", 1));
  CHECK(ledger.TakeClosed(Ms("2025-03-01T10:06:01Z")).size() == 1);
  ledger.Add(Rec(Ms("2025-03-01T10:05:50Z"), "acme", "b1", 2));  // ended late
  ledger.Add(Rec(Ms("2025-03-01T10:06:02Z"), "acme", "b1", 4));
  auto again = ledger.TakeClosed(Ms("2025-03-01T10:06:03Z"));
  REQUIRE(again.size() == 1);
  CHECK(again[0].minute_ms == Ms("2025-03-01T10:05:00Z"));
  CHECK(again[0].usage.cost == 2);
  auto all = ledger.TakeAll();
  REQUIRE(all.size() == 1);
  CHECK(all[0].usage.cost == 4);
  CHECK(ledger.empty());
}

TEST_CASE("records that move between many minutes each reach their own", "[showback][ledger]") {
  // Each new minute may move the others (the map grows); records go back
  // and forth between minutes, and a take closes some in the middle.
  ShowbackLedger ledger;
  const int64_t start = Ms("2025-03-01T10:00:00Z");
  for (int round = 0; round < 3; ++round)
    for (int m = 0; m < 100; ++m) {
      ledger.Add(Rec(start + m * 60'000 + 1'000, "acme", "b1", 1));
      ledger.Add(Rec(start + 1'000, "acme", "b1", 1));  // always the first minute
    }
  CHECK(ledger.size() == 100);
  auto first = ledger.TakeClosed(start + 50 * 60'000);  // minutes 0 to 49
  REQUIRE(first.size() == 50);
  CHECK(first[0].usage.cost == 303);  // 3 of its own, 300 from the back and forth
  CHECK(first[49].usage.cost == 3);
  ledger.Add(Rec(start + 99 * 60'000, "acme", "b1", 1));
  ledger.Add(Rec(start + 2'000, "acme", "b1", 1));  // late for a taken minute
  auto rest = ledger.TakeAll();
  REQUIRE(rest.size() == 51);
  CHECK(rest[0].minute_ms == start);
  CHECK(rest[0].usage.cost == 1);
  CHECK(rest[50].usage.cost == 4);
}

}  // namespace
}  // namespace geogate::accounting
