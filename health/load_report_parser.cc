#include "health/load_report_parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

namespace geogate::health {
namespace {

// Longer lines are skipped: vLLM's gauges are short, and a bound keeps a
// hostile or broken body from growing the pending buffer.
constexpr size_t kMaxLineBytes = 4096;

int32_t ToCount(double v) {
  if (!std::isfinite(v) || v < 0) return -1;
  return static_cast<int32_t>(
      std::min<double>(std::llround(v), std::numeric_limits<int32_t>::max()));
}

float ToFraction(double v) {
  if (!std::isfinite(v) || v < 0) return -1;
  return static_cast<float>(std::min(v, 1.0));
}

std::optional<double> JsonNumber(const boost::json::object& obj, std::string_view key) {
  const boost::json::value* v = obj.if_contains(key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  boost::system::error_code ec;
  double d = v->to_number<double>(ec);
  if (ec) return std::nullopt;
  return d;
}

std::optional<double> ParseDouble(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<LoadReport> ParseJsonLoad(std::string_view body) {
  boost::system::error_code ec;
  boost::json::value doc = boost::json::parse(body, ec);
  if (ec || !doc.is_object()) return std::nullopt;
  const boost::json::object& obj = doc.get_object();

  LoadReport report;
  bool any = false;
  auto queue = JsonNumber(obj, "queue_depth");
  if (!queue) queue = JsonNumber(obj, "num_requests_waiting");
  if (queue) {
    report.queue_depth = ToCount(*queue);
    any = true;
  }
  auto inflight = JsonNumber(obj, "inflight");
  if (!inflight) inflight = JsonNumber(obj, "num_requests_running");
  if (inflight) {
    report.inflight = ToCount(*inflight);
    any = true;
  }
  if (auto kv = JsonNumber(obj, "kv_cache_utilization")) {
    report.kv_cache_utilization = ToFraction(*kv);
    any = true;
  }
  if (!any) return std::nullopt;
  return report;
}

void PrometheusLoadScanner::line(std::string_view text) {
  if (text.empty() || text.front() == '#') return;
  size_t name_end = text.find_first_of("{ \t");
  if (name_end == std::string_view::npos) return;
  const std::string_view name = text.substr(0, name_end);
  enum { kWaiting, kRunning, kKv } which;
  if (name == "vllm:num_requests_waiting") {
    which = kWaiting;
  } else if (name == "vllm:num_requests_running") {
    which = kRunning;
  } else if (name == "vllm:gpu_cache_usage_perc" || name == "vllm:kv_cache_usage_perc") {
    which = kKv;
  } else {
    return;
  }
  size_t pos = name_end;
  if (text[pos] == '{') {
    // Skip the label set; label values are quoted and may hold '}' or '\"'.
    bool quoted = false;
    for (++pos; pos < text.size(); ++pos) {
      const char c = text[pos];
      if (quoted) {
        if (c == '\\') {
          ++pos;
        } else if (c == '"') {
          quoted = false;
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == '}') {
        break;
      }
    }
    if (pos >= text.size()) return;
    ++pos;
  }
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t'))
    ++pos;
  size_t value_end = text.find_first_of(" \t", pos);
  if (value_end == std::string_view::npos) value_end = text.size();
  std::optional<double> value = ParseDouble(text.substr(pos, value_end - pos));
  if (!value) return;
  switch (which) {
    case kWaiting:
      waiting_ += *value;
      have_waiting_ = true;
      break;
    case kRunning:
      running_ += *value;
      have_running_ = true;
      break;
    case kKv:
      kv_ = std::max(kv_, *value);
      have_kv_ = true;
      break;
  }
}

void PrometheusLoadScanner::feed(std::string_view chunk) {
  while (!chunk.empty()) {
    const size_t nl = chunk.find('\n');
    const std::string_view piece = chunk.substr(0, nl);
    if (!overlong_) {
      if (pending_.size() + piece.size() > kMaxLineBytes) {
        overlong_ = true;
        pending_.clear();
      } else {
        pending_.append(piece);
      }
    }
    if (nl == std::string_view::npos) return;
    if (!overlong_) {
      std::string_view text = pending_;
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      line(text);
    }
    pending_.clear();
    overlong_ = false;
    chunk.remove_prefix(nl + 1);
  }
}

void PrometheusLoadScanner::finish() {
  if (!overlong_ && !pending_.empty()) line(pending_);
  pending_.clear();
  overlong_ = false;
}

std::optional<LoadReport> PrometheusLoadScanner::result() const {
  if (!have_waiting_ && !have_running_ && !have_kv_) return std::nullopt;
  LoadReport report;
  if (have_waiting_) report.queue_depth = ToCount(waiting_);
  if (have_running_) report.inflight = ToCount(running_);
  if (have_kv_) report.kv_cache_utilization = ToFraction(kv_);
  return report;
}

std::optional<LoadReport> ParsePrometheusLoad(std::string_view body) {
  PrometheusLoadScanner scanner;
  scanner.feed(body);
  scanner.finish();
  return scanner.result();
}

}  // namespace geogate::health
