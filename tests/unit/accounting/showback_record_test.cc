// Accounting arithmetic: GPU-seconds, cost, the reported/estimated split and
// the calendar helpers the ledger and budgets rely on.
#include <catch2/catch.hpp>

#include "accounting/showback_record.h"
#include "showback_test_util.h"

namespace geogate::accounting {
namespace {

using testing::Ms;

TEST_CASE("GPU-seconds are stream time over capacity and cost prices them per hour", "[showback]") {
  // docs/showback.md's worked example: 30 s on an H100 at $2.49/h, capacity 64.
  CHECK(GpuSeconds(30, 64) == 0.46875);
  CHECK(CostOf(0.46875, 2.49) == Approx(0.00032421875).epsilon(1e-12));
  CHECK(GpuSeconds(30, 0) == 30);  // capacity 0 counts as 1
  CHECK(GpuSeconds(-1, 64) == 0);  // a clock step never bills negative time
  CHECK(CostOf(3600, 2.49) == Approx(2.49));
}

TEST_CASE("MakeShowbackRecord takes the backend's dimensions and prices the stream", "[showback]") {
  auto cfg = testing::Fleet();
  ShowbackRecord r = MakeShowbackRecord(*cfg, 0, "acme", "llama-70b", 120, 480, false, 30,
                                        Ms("2025-03-01T10:05:42Z"));
  CHECK(r.tenant == "acme");
  CHECK(r.model == "llama-70b");
  CHECK(r.region == "eu-west");
  CHECK(r.gpu == "H100");
  CHECK(r.provider == "provider-a");
  CHECK(r.tier == "reserved");
  CHECK(r.backend == "eu-h100-r1");
  CHECK(r.requests == 1);
  CHECK(r.prompt_tokens == 120);
  CHECK(r.completion_tokens == 480);
  CHECK_FALSE(r.estimated);
  CHECK(r.gpu_seconds == 0.46875);
  CHECK(r.cost == Approx(0.00032421875).epsilon(1e-12));

  ShowbackRecord unknown =
      MakeShowbackRecord(*cfg, 2, "", "llama-8b", -1, -1, true, 2, Ms("2025-03-01T10:05:42Z"));
  CHECK(unknown.prompt_tokens == 0);
  CHECK(unknown.completion_tokens == 0);
  CHECK(unknown.tier == "spot");
  CHECK(unknown.gpu_seconds == 2.0 / 16);
}

TEST_CASE("usage keeps reported and estimated tokens apart and sums the rest", "[showback]") {
  ShowbackRecord reported;
  reported.prompt_tokens = 100;
  reported.completion_tokens = 300;
  reported.gpu_seconds = 0.5;
  reported.cost = 0.25;
  ShowbackRecord estimated = reported;
  estimated.estimated = true;
  estimated.prompt_tokens = 0;  // nothing reported: only SSE events counted
  estimated.completion_tokens = 100;

  ShowbackUsage u;
  u.Add(reported);
  u.Add(reported);
  u.Add(estimated);
  CHECK(u.requests == 3);
  CHECK(u.estimated_requests == 1);
  CHECK(u.reported_prompt_tokens == 200);
  CHECK(u.reported_completion_tokens == 600);
  CHECK(u.estimated_prompt_tokens == 0);
  CHECK(u.estimated_completion_tokens == 100);
  CHECK(u.prompt_tokens() == 200);
  CHECK(u.completion_tokens() == 700);
  CHECK(u.estimated_share() == Approx(100.0 / 900));
  CHECK(u.gpu_seconds == 1.5);
  CHECK(u.cost == 0.75);

  ShowbackUsage twice = u;
  twice.Add(u);
  CHECK(twice.requests == 6);
  CHECK(twice.cost == 1.5);
  CHECK(ShowbackUsage{}.estimated_share() == 0);
}

TEST_CASE("minutes and months are UTC floors", "[showback]") {
  CHECK(MinuteOf(Ms("2025-03-01T10:05:42.123Z")) == Ms("2025-03-01T10:05:00Z"));
  CHECK(MinuteOf(Ms("2025-03-01T10:05:00Z")) == Ms("2025-03-01T10:05:00Z"));
  CHECK(MinuteOf(-1) == -60000);
  CHECK(UtcMonthOf(0) == 0);
  CHECK(UtcMonthOf(Ms("2025-03-31T23:59:59.999Z")) == (2025 - 1970) * 12 + 2);
  CHECK(UtcMonthOf(Ms("2025-04-01T00:00:00Z")) == (2025 - 1970) * 12 + 3);
  CHECK(UtcMonthStartMs(UtcMonthOf(Ms("2025-02-14T12:00:00Z"))) == Ms("2025-02-01T00:00:00Z"));
  CHECK(UtcMonthStartMs(UtcMonthOf(Ms("2024-12-31T23:00:00Z")) + 1) == Ms("2025-01-01T00:00:00Z"));
}

}  // namespace
}  // namespace geogate::accounting
