// Showback queries: query-string parsing, grouping, filtering, totals, and
// the JSON and CSV output.
#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>

#include "accounting/showback_format.h"
#include "accounting/showback_query.h"
#include "accounting/showback_store.h"
#include "showback_test_util.h"

namespace geogate::accounting {
namespace {

using testing::Ms;

const int64_t kNow = Ms("2025-03-10T12:00:30Z");

ShowbackBucket Bucket(int64_t minute_ms, ShowbackDims dims, double cost, int64_t completion = 100,
                      bool estimated = false) {
  ShowbackBucket b;
  b.minute_ms = minute_ms;
  b.dims = std::move(dims);
  b.usage.requests = 1;
  b.usage.gpu_seconds = cost * 100;
  b.usage.cost = cost;
  if (estimated) {
    b.usage.estimated_requests = 1;
    b.usage.estimated_completion_tokens = completion;
  } else {
    b.usage.reported_prompt_tokens = 10;
    b.usage.reported_completion_tokens = completion;
  }
  return b;
}

ShowbackDims Dims(std::string tenant, std::string model, std::string backend = "eu-h100-r1",
                  std::string gpu = "H100") {
  return {std::move(tenant), std::move(model), "eu-west",         std::move(gpu),
          "provider-a",      "reserved",       std::move(backend)};
}

ShowbackQuery Parse(std::string_view qs) {
  auto q = ParseShowbackQuery(qs, kNow);
  INFO(q.status().ToString());
  REQUIRE(q.ok());
  return *q;
}

std::string ParseError(std::string_view qs) {
  auto q = ParseShowbackQuery(qs, kNow);
  REQUIRE_FALSE(q.ok());
  CHECK(q.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(q.status().message());
}

// ---------------------------------------------------------------- parsing --

TEST_CASE("an empty query is the last 24 hours as JSON with live data", "[showback][query]") {
  for (std::string_view qs : {"", "?"}) {
    ShowbackQuery q = Parse(qs);
    CHECK(q.to_ms == kNow);
    CHECK(q.from_ms == kNow - 24 * 3600 * 1000);
    CHECK(q.group_by.empty());
    CHECK(q.format == ShowbackFormat::kJson);
    CHECK(q.live);
  }
}

TEST_CASE("from and to take RFC 3339, dates and unix seconds", "[showback][query]") {
  ShowbackQuery q = Parse("from=2025-03-01T00:00:00Z&to=2025-03-02T01:00:00%2B01:00");
  CHECK(q.from_ms == Ms("2025-03-01T00:00:00Z"));
  CHECK(q.to_ms == Ms("2025-03-02T00:00:00Z"));
  q = Parse("from=2025-03-01&to=2025-04-01");
  CHECK(q.from_ms == Ms("2025-03-01T00:00:00Z"));
  CHECK(q.to_ms == Ms("2025-04-01T00:00:00Z"));
  q = Parse("from=1740787200");
  CHECK(q.from_ms == Ms("2025-03-01T00:00:00Z"));
  CHECK(q.to_ms == kNow);
  q = Parse("to=1740787200");
  CHECK(q.from_ms == Ms("2025-02-28T00:00:00Z"));
}

TEST_CASE("group_by, format, live and filters", "[showback][query]") {
  ShowbackQuery q = Parse("group_by=tenant,model,tenant&format=csv&live=false&tenant=acme,beta");
  REQUIRE(q.group_by.size() == 2);  // repeats collapse
  CHECK(q.group_by[0] == ShowbackDim::kTenant);
  CHECK(q.group_by[1] == ShowbackDim::kModel);
  CHECK(q.format == ShowbackFormat::kCsv);
  CHECK_FALSE(q.live);
  CHECK(q.filters[0] == std::vector<std::string>{"acme", "beta"});
  q = Parse("group_by=backend%2Cgpu&model=meta-llama%2FLlama-3.1-8B");
  CHECK(q.group_by == std::vector<ShowbackDim>{ShowbackDim::kBackend, ShowbackDim::kGpu});
  CHECK(q.filters[1] == std::vector<std::string>{"meta-llama/Llama-3.1-8B"});
}

TEST_CASE("query-string errors say what is wrong", "[showback][query]") {
  CHECK(ParseError("group_by=tenant,team") ==
        "unknown group_by key 'team' (known: tenant, model, region, gpu, provider, tier, "
        "backend)");
  CHECK(ParseError("from=yesterday") ==
        "'from' must be RFC 3339 (2025-03-01T00:00:00Z), a date (2025-03-01) or unix seconds, "
        "got 'yesterday'");
  CHECK(ParseError("to=") == "'to' is empty");
  CHECK(ParseError("from=99999999999999") == "'from' is out of range: 99999999999999");
  CHECK(ParseError("from=2025-03-02&to=2025-03-01") ==
        "'from' (2025-03-02T00:00:00Z) must be before 'to' (2025-03-01T00:00:00Z)");
  CHECK(ParseError("from=1740787200&to=1740787200").find("must be before") != std::string::npos);
  CHECK(ParseError("format=xml") == "'format' must be json or csv, got 'xml'");
  CHECK(ParseError("live=maybe") == "'live' must be true or false, got 'maybe'");
  CHECK(ParseError("tenant=") == "filter 'tenant' needs at least one value");
  CHECK(ParseError("tenant=a&tenant=b") == "parameter 'tenant' given twice");
  CHECK(ParseError("limit=10").rfind("unknown parameter 'limit' (known: from, to,", 0) == 0);
  CHECK(ParseError("a=%zz") == "malformed query string");
}

// ------------------------------------------------------------ aggregation --

TEST_CASE("grouping sums buckets and orders rows by cost", "[showback][query]") {
  ShowbackStore store;
  REQUIRE(store.Open({"", 168, "fra1"}, kNow).ok());
  int64_t m1 = Ms("2025-03-10T11:00:00Z"), m2 = Ms("2025-03-10T11:01:00Z");
  store.Append({Bucket(m1, Dims("acme", "llama-70b"), 1), Bucket(m2, Dims("acme", "llama-70b"), 2),
                Bucket(m1, Dims("acme", "llama-8b", "eu-l4-s1", "L4"), 0.5, 40, true),
                Bucket(m2, Dims("beta", "llama-70b"), 8)},
               kNow);

  ShowbackResult r = store.Query(Parse("group_by=tenant"));
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0].group == std::vector<std::string>{"beta"});
  CHECK(r.rows[0].usage.cost == 8);
  CHECK(r.rows[1].group == std::vector<std::string>{"acme"});
  CHECK(r.rows[1].usage.cost == 3.5);
  CHECK(r.rows[1].usage.requests == 3);
  CHECK(r.rows[1].usage.estimated_completion_tokens == 40);
  CHECK(r.rows[1].usage.completion_tokens() == 240);
  CHECK(r.totals.cost == 11.5);
  CHECK(r.totals.requests == 4);
  CHECK(r.totals.gpu_seconds == Approx(1150));

  r = store.Query(Parse("group_by=model,gpu"));
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0].group == std::vector<std::string>{"llama-70b", "H100"});
  CHECK(r.rows[0].usage.cost == 11);
  CHECK(r.rows[1].group == std::vector<std::string>{"llama-8b", "L4"});

  r = store.Query(Parse(""));  // no group_by: one row, the totals
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0].group.empty());
  CHECK(r.rows[0].usage == r.totals);
}

TEST_CASE("filters and the time range select buckets", "[showback][query]") {
  ShowbackStore store;
  REQUIRE(store.Open({"", 168, "fra1"}, kNow).ok());
  store.Append({Bucket(Ms("2025-03-10T10:59:00Z"), Dims("acme", "llama-70b"), 1),
                Bucket(Ms("2025-03-10T11:00:00Z"), Dims("acme", "llama-70b"), 2),
                Bucket(Ms("2025-03-10T11:30:00Z"), Dims("beta", "llama-8b"), 4),
                Bucket(Ms("2025-03-10T11:59:00Z"), Dims("gamma", "llama-70b"), 8)},
               kNow);
  CHECK(store.Query(Parse("tenant=acme,beta")).totals.cost == 7);
  CHECK(store.Query(Parse("tenant=acme&model=llama-8b")).totals.cost == 0);
  CHECK(store.Query(Parse("model=llama-70b&backend=eu-h100-r1")).totals.cost == 11);
  // A minute counts when it overlaps [from, to): 10:59 ends at 11:00 sharp.
  CHECK(store.Query(Parse("from=2025-03-10T11:00:00Z&to=2025-03-10T11:59:00Z")).totals.cost == 6);
  CHECK(store.Query(Parse("from=2025-03-10T10:59:30Z&to=2025-03-10T11:00:01Z")).totals.cost == 3);
  CHECK(store.Query(Parse("from=2025-03-10T12:00:00Z")).rows.empty());
}

TEST_CASE("live buckets are added unless live=false", "[showback][query]") {
  ShowbackStore store;
  REQUIRE(store.Open({"", 168, "fra1"}, kNow).ok());
  store.Append({Bucket(Ms("2025-03-10T11:59:00Z"), Dims("acme", "llama-70b"), 1)}, kNow);
  std::vector<ShowbackBucket> live = {
      Bucket(Ms("2025-03-10T12:00:00Z"), Dims("acme", "llama-70b"), 2),
      Bucket(Ms("2025-03-10T12:00:00Z"), Dims("acme", "llama-70b"), 4)};  // a second worker
  CHECK(store.Query(Parse("group_by=tenant"), live).totals.cost == 7);
  CHECK(store.Query(Parse("group_by=tenant"), live).rows.size() == 1);
  CHECK(store.Query(Parse("live=false"), live).totals.cost == 1);
}

// ---------------------------------------------------------------- formats --

ShowbackResult Sample() {
  ShowbackResult r;
  r.from_ms = Ms("2025-03-01T00:00:00Z");
  r.to_ms = Ms("2025-03-02T00:00:00Z");
  r.group_by = {ShowbackDim::kTenant, ShowbackDim::kModel};
  ShowbackUsage u;
  u.requests = 3;
  u.estimated_requests = 1;
  u.reported_prompt_tokens = 30;
  u.reported_completion_tokens = 50;
  u.estimated_completion_tokens = 20;
  u.gpu_seconds = 0.46875;
  u.cost = 0.00032421875;
  r.rows.push_back({{"acme", "llama-70b"}, u});
  r.rows.push_back({{"we,ird \"team\"", "model\r\nx"}, u});
  r.totals = u;
  r.totals.Add(u);
  return r;
}

TEST_CASE("JSON output", "[showback][query]") {
  std::string json = FormatShowbackJson(Sample());
  CHECK(json.rfind(R"({"from":"2025-03-01T00:00:00Z","to":"2025-03-02T00:00:00Z",)"
                   R"("group_by":["tenant","model"],"rows":[{"tenant":"acme",)"
                   R"("model":"llama-70b","requests":3,"estimated_requests":1,)"
                   R"("prompt_tokens":30,"completion_tokens":70,"estimated_prompt_tokens":0,)"
                   R"("estimated_completion_tokens":20,"estimated_share":0.2,)"
                   R"("gpu_seconds":0.46875,"cost":0.00032421875},)",
                   0) == 0);
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json, ec);
  REQUIRE_FALSE(ec);
  CHECK(v.at("rows").at(1).at("tenant").as_string() == "we,ird \"team\"");
  CHECK(v.at("totals").at("requests").as_int64() == 6);
  CHECK(v.at("totals").at("cost").as_double() == Approx(0.0006484375));

  ShowbackResult empty;
  empty.from_ms = 0;
  empty.to_ms = 60000;
  CHECK(FormatShowbackJson(empty) ==
        R"({"from":"1970-01-01T00:00:00Z","to":"1970-01-01T00:01:00Z","group_by":[],"rows":[],)"
        R"("totals":{"requests":0,"estimated_requests":0,"prompt_tokens":0,)"
        R"("completion_tokens":0,"estimated_prompt_tokens":0,"estimated_completion_tokens":0,)"
        R"("estimated_share":0,"gpu_seconds":0,"cost":0}})");
}

TEST_CASE("CSV output quotes odd names the RFC 4180 way", "[showback][query]") {
  CHECK(FormatShowbackCsv(Sample()) ==
        "tenant,model,requests,estimated_requests,prompt_tokens,completion_tokens,"
        "estimated_prompt_tokens,estimated_completion_tokens,estimated_share,gpu_seconds,cost\r\n"
        "acme,llama-70b,3,1,30,70,0,20,0.2,0.46875,0.00032421875\r\n"
        "\"we,ird \"\"team\"\"\",\"model\r\nx\",3,1,30,70,0,20,0.2,0.46875,0.00032421875\r\n");
  ShowbackResult totals_only;
  totals_only.rows.push_back({{}, ShowbackUsage{}});
  CHECK(FormatShowbackCsv(totals_only) ==
        "requests,estimated_requests,prompt_tokens,completion_tokens,estimated_prompt_tokens,"
        "estimated_completion_tokens,estimated_share,gpu_seconds,cost\r\n0,0,0,0,0,0,0,0,0\r\n");
}

}  // namespace
}  // namespace geogate::accounting
