#include <catch2/catch.hpp>

#include <charconv>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "observability/access_log.h"
#include "observability/metrics.h"

#include <boost/json/parse.hpp>

using namespace geogate::observability;

TEST_CASE("histograms bucket, sum and merge", "[metrics]") {
  HistogramVec<1> h1(LatencyBuckets()), h2(LatencyBuckets()), m(LatencyBuckets());
  h1.Observe({"b"}, 0.0005);
  h1.Observe({"b"}, 0.2);
  h2.Observe({"b"}, 1000);  // beyond the last bound: +Inf bucket
  h1.MergeInto(m);
  h2.MergeInto(m);
  const HistogramData& d = m.values().find(LabelView<1>{"b"})->second;
  CHECK(d.count == 3);
  CHECK(d.sum == Approx(1000.2005));
  CHECK(d.buckets.front() == 1);
  CHECK(d.buckets.back() == 1);
}

TEST_CASE("histograms: many values of one series at once, as one at a time", "[metrics]") {
  HistogramVec<1> one(LatencyBuckets()), all(LatencyBuckets());
  std::vector<double> gaps = {0.0001, 0.003, 0.003, 0.07, 2.5, 1e9};
  for (double g : gaps)
    one.Observe({"b"}, g);
  all.ObserveAll({"b"}, gaps);
  all.ObserveAll({"c"}, {});  // nothing to observe: no series either
  const HistogramData& a = one.values().find(LabelView<1>{"b"})->second;
  const HistogramData& b = all.values().find(LabelView<1>{"b"})->second;
  CHECK(b.count == a.count);
  CHECK(b.sum == a.sum);
  CHECK(b.buckets == a.buckets);
  CHECK(all.values().size() == 1);
}

// The last series looked up is tried first (SeriesMap): whatever order the
// labels come in, every value lands where a plain map of the label texts
// puts it.
TEST_CASE("counters: every add lands under its labels, as a plain map counts", "[metrics]") {
  std::mt19937 rng(20261207);
  // Few texts, so the same labels often come twice in a row; two of them
  // of one length, so only their bytes tell them apart.
  const std::vector<std::string> texts = {"a", "b", "eu-west", "us-east", "", "long-backend-name"};
  CounterVec<3> c;
  std::map<std::array<std::string, 3>, double> want;
  for (int i = 0; i < 20000; ++i) {
    std::array<std::string, 3> l;
    for (auto& x : l)
      x = texts[rng() % (rng() % 4 == 0 ? texts.size() : 2)];
    c.Add({l[0], l[1], l[2]}, i % 7);
    want[l] += i % 7;
  }
  REQUIRE(c.values().size() == want.size());
  for (const auto& [l, v] : want)
    CHECK(c.values().find(LabelView<3>{l[0], l[1], l[2]})->second == v);
}

TEST_CASE("counters: a label's bytes, not its address, choose the series", "[metrics]") {
  // As after a reload: the old config's label strings are freed and a new
  // one takes the same address, with the same length and other text.
  CounterVec<2> c;
  char backend[] = "gpu-a";
  c.Add({backend, "200"});
  backend[4] = 'b';  // same address, same size, other label
  c.Add({backend, "200"}, 2);
  CHECK(c.values().find(LabelView<2>{"gpu-a", "200"})->second == 1);
  CHECK(c.values().find(LabelView<2>{"gpu-b", "200"})->second == 2);
  // An empty label may come as a view with no data (no tenant): the same
  // series as "" (and under UBSan, no null pointer reaches memcmp).
  c.Add({std::string_view(), "200"});
  c.Add({std::string_view(), "200"});
  c.Add({"", "200"});
  CHECK(c.values().find(LabelView<2>{"", "200"})->second == 3);
}

TEST_CASE("counters and histograms: the last series survives inserts and copies", "[metrics]") {
  CounterVec<1> c;
  c.Add({"first"});
  // Enough new series to rehash the map (entries move) between two adds
  // of the same labels.
  for (int i = 0; i < 300; ++i) {
    c.Add({"first"});
    c.Add({std::to_string(i)});
  }
  c.Add({"first"});
  CHECK(c.values().find(LabelView<1>{"first"})->second == 302);
  CHECK(c.values().size() == 301);

  // A copy counts into its own map, not the original's last series.
  CounterVec<1> copy = c;
  copy.Add({"first"});
  c.Add({"first"});
  CounterVec<1> assigned;
  assigned.Add({"first"});  // its own last series, before the assignment
  assigned = copy;
  assigned.Add({"first"}, 10);
  CHECK(c.values().find(LabelView<1>{"first"})->second == 303);
  CHECK(copy.values().find(LabelView<1>{"first"})->second == 303);
  CHECK(assigned.values().find(LabelView<1>{"first"})->second == 313);

  // A merge adds series to the target: its last series then is one of them.
  HistogramVec<1> a(LatencyBuckets()), m(LatencyBuckets());
  m.Observe({"x"}, 1);
  for (int i = 0; i < 100; ++i)
    a.Observe({std::to_string(i)}, 0.001);
  a.MergeInto(m);
  m.Observe({"x"}, 1);
  a.MergeInto(m);
  CHECK(m.values().find(LabelView<1>{"x"})->second.count == 2);
  CHECK(m.values().find(LabelView<1>{"99"})->second.count == 2);
  CHECK(m.values().size() == 101);
}

TEST_CASE("Prometheus text: families, escaping, cumulative buckets", "[metrics]") {
  PromWriter w;
  CounterVec<1> c;
  c.Add({"a\"b\\c\nd"}, 2);
  w.Family("x_total", "counter", "help text");
  w.Counter("x_total", std::array<const char*, 1>{"l"}, c);
  HistogramVec<1> h(LatencyBuckets());
  h.Observe({"b"}, 0.002);
  h.Observe({"b"}, 0.002);
  w.Family("y_seconds", "histogram", "h");
  w.Histogram("y_seconds", std::array<const char*, 1>{"backend"}, h);
  std::string t = w.Take();
  CHECK(t.find("# HELP x_total help text\n# TYPE x_total counter\n") == 0);
  CHECK(t.find("x_total{l=\"a\\\"b\\\\c\\nd\"} 2\n") != std::string::npos);
  CHECK(t.find("y_seconds_bucket{backend=\"b\",le=\"0.001\"} 0\n") != std::string::npos);
  CHECK(t.find("y_seconds_bucket{backend=\"b\",le=\"0.0025\"} 2\n") != std::string::npos);
  CHECK(t.find("y_seconds_bucket{backend=\"b\",le=\"+Inf\"} 2\n") != std::string::npos);
  CHECK(t.find("y_seconds_count{backend=\"b\"} 2\n") != std::string::npos);
  CHECK(FormatValue(3) == "3");
  CHECK(FormatValue(0.25) == "0.25");
}

TEST_CASE("access log lines are one valid JSON object each", "[accesslog]") {
  AccessRecord r;
  r.unix_ms = 1700000000123;
  r.request_id = "rid";
  r.client_ip = "203.0.113.7";
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.model = "m\"odel";
  r.status = 200;
  r.backend = "b1";
  r.region = "eu-west";
  r.ttft_ms = 12.5;
  r.rule = "eu";
  r.allowed = "eu-west,eu-central";
  r.country = "DE";
  r.prompt_tokens = 3;
  r.completion_tokens = 5;
  std::string line;
  FormatAccessRecord(r, line);
  REQUIRE(line.back() == '\n');
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  auto v = boost::json::parse(line);
  CHECK(v.at("ts").as_string() == "2023-11-14T22:13:20.123Z");
  CHECK(v.at("model").as_string() == "m\"odel");
  CHECK(v.at("status").as_int64() == 200);
  CHECK(v.at("ttft_ms").as_double() == 12.5);
  CHECK(v.at("residency").at("rule").as_string() == "eu");
  CHECK(v.at("residency").at("allowed").as_string() == "eu-west,eu-central");
  CHECK(v.at("completion_tokens").as_int64() == 5);
}

TEST_CASE("access log lines with long strings are whole and valid", "[accesslog]") {
  // Longer than the stack buffer a line is normally written in: written in
  // place at the end of what the buffer already holds.
  std::string path = "/v1/chat/completions?q=" + std::string(3000, 'p') + "\"\\\n";
  std::string reason(2000, 'r');
  AccessRecord r;
  r.unix_ms = 1700000000123;
  r.path = path;
  r.route_reason = reason;
  r.status = 200;
  std::string buf = "previous line\n";
  FormatAccessRecord(r, buf);
  FormatAccessRecord(r, buf);
  REQUIRE(buf.rfind("previous line\n", 0) == 0);
  std::string_view rest(buf);
  rest.remove_prefix(sizeof "previous line\n" - 1);
  size_t nl = rest.find('\n');
  REQUIRE(nl != std::string_view::npos);
  CHECK(rest.substr(nl + 1) == std::string(rest.substr(0, nl + 1)));  // two equal lines
  auto v = boost::json::parse(rest.substr(0, nl));
  CHECK(v.at("path").as_string() == path);
  CHECK(v.at("route").as_string() == reason);
  CHECK(v.at("status").as_int64() == 200);
}

TEST_CASE("access log lines fit their bound with every member at its widest", "[accesslog]") {
  // Every string member made of bytes that are escaped six to one, every
  // optional member on and the numbers at their longest: the line is sized
  // from the same member list it is written from, so none of this may write
  // past the memory given to it (the ASan build checks), at sizes on both
  // sides of the stack buffer.
  for (size_t len : {size_t{0}, size_t{1}, size_t{60}, size_t{300}, size_t{2000}}) {
    std::string s(len, '\x01');
    AccessRecord r;
    r.unix_ms = INT64_C(253402300799999);  // 9999-12-31T23:59:59.999Z
    for (std::string_view* m :
         {&r.request_id, &r.edge, &r.client_ip, &r.method, &r.path, &r.model, &r.tenant,
          &r.error_code, &r.backend, &r.region, &r.route_reason, &r.country, &r.continent, &r.rule,
          &r.allowed, &r.policy_hash, &r.upstream_error})
      *m = s;
    r.status = 4294967295u;
    r.stream = true;
    r.ttft_ms = 9.9e49;
    r.duration_ms = -9.9e49;
    r.bytes_in = r.bytes_out = r.geo_epoch = INT64_MAX;  // written as signed numbers
    r.attempts = 4294967295u;
    r.prompt_tokens = r.completion_tokens = INT64_MAX;
    r.tokens_estimated = true;
    r.gpu_seconds = 9.9e49;
    r.cost = -9.9e49;
    std::string line;
    FormatAccessRecord(r, line);
    REQUIRE(line.back() == '\n');
    auto v = boost::json::parse(line);
    CHECK(v.at("ts").as_string() == "9999-12-31T23:59:59.999Z");
    if (len > 0) CHECK(v.at("tenant").as_string() == s);  // left out when empty
    CHECK(v.at("residency").at("policy").as_string() == s);
    CHECK(v.at("bytes_out").as_int64() == INT64_MAX);
    CHECK(std::abs(v.at("cost").as_double() / -9.9e49 - 1) < 1e-9);
    CHECK(v.at("tokens_estimated").as_bool());
  }
}

TEST_CASE("access log timestamps follow the clock across seconds and days", "[accesslog]") {
  // The seconds text is kept per thread for the current second: lines in
  // the same second, the next one, back in time and across a day must all
  // be right.
  auto ts = [](int64_t unix_ms) {
    AccessRecord r;
    r.unix_ms = unix_ms;
    std::string line;
    FormatAccessRecord(r, line);
    return std::string(boost::json::parse(line).at("ts").as_string());
  };
  CHECK(ts(1700000000123) == "2023-11-14T22:13:20.123Z");
  CHECK(ts(1700000000999) == "2023-11-14T22:13:20.999Z");
  CHECK(ts(1700000001000) == "2023-11-14T22:13:21.000Z");
  CHECK(ts(1700000000007) == "2023-11-14T22:13:20.007Z");
  CHECK(ts(1700006399050) == "2023-11-14T23:59:59.050Z");
  CHECK(ts(1700006400050) == "2023-11-15T00:00:00.050Z");
  CHECK(ts(0) == "1970-01-01T00:00:00.000Z");
  CHECK(ts(-1) == "1969-12-31T23:59:59.999Z");
}

TEST_CASE("access log numbers keep their fixed precision", "[accesslog]") {
  AccessRecord r;
  r.status = 429;
  r.ttft_ms = 41.2;
  r.duration_ms = 1873.54321;
  r.bytes_out = 20411;
  r.attempts = 2;
  r.geo_epoch = 1741564800;
  r.prompt_tokens = 25;
  r.completion_tokens = 180;
  r.gpu_seconds = 0.0292734;
  r.cost = 0.0000202512;
  std::string line;
  FormatAccessRecord(r, line);
  CHECK(line.find(R"("status":429,)") != std::string::npos);
  CHECK(line.find(R"("ttft_ms":41.200,"duration_ms":1873.543,)") != std::string::npos);
  CHECK(line.find(R"("bytes_out":20411,"attempts":2,)") != std::string::npos);
  CHECK(line.find(R"("geo_epoch":1741564800})") != std::string::npos);
  CHECK(line.find(R"("gpu_seconds":0.029273,"cost":0.00002025})") != std::string::npos);
  r.ttft_ms = -1;  // no first byte
  line.clear();
  FormatAccessRecord(r, line);
  CHECK(line.find(R"("ttft_ms":null,)") != std::string::npos);
}

TEST_CASE("access log lines say how the request ended", "[accesslog]") {
  // Every line carries `outcome` from a fixed list; `upstream_error` (the
  // backend's failure reason) only when a backend failure ended it.
  auto line_of = [](const AccessRecord& r) {
    std::string line;
    FormatAccessRecord(r, line);
    return boost::json::parse(line).as_object();
  };
  AccessRecord r;
  r.status = 200;
  auto done = line_of(r);
  CHECK(done.at("outcome").as_string() == "completed");  // the default
  CHECK_FALSE(done.contains("upstream_error"));
  CHECK_FALSE(done.contains("error"));

  r.outcome = RequestOutcome::kInterrupted;
  r.error_code = "stream_interrupted";
  r.upstream_error = "reset";
  auto cut = line_of(r);
  CHECK(cut.at("status").as_int64() == 200);  // what the client was told in the head
  CHECK(cut.at("outcome").as_string() == "interrupted");
  CHECK(cut.at("error").as_string() == "stream_interrupted");
  CHECK(cut.at("upstream_error").as_string() == "reset");

  std::vector<std::string> names;
  for (RequestOutcome o :
       {RequestOutcome::kCompleted, RequestOutcome::kRejected, RequestOutcome::kUpstreamFailed,
        RequestOutcome::kInterrupted, RequestOutcome::kClientClosed}) {
    r.outcome = o;
    names.emplace_back(line_of(r).at("outcome").as_string());
    CHECK(names.back() == RequestOutcomeName(o));
  }
  CHECK(names == std::vector<std::string>{"completed", "rejected", "upstream_failed", "interrupted",
                                          "client_closed"});
}
