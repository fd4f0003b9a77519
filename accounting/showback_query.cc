#include "accounting/showback_query.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include <boost/url/params_view.hpp>
#include <boost/url/parse_query.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "accounting/showback_line.h"
#include "common/strings.h"

namespace geogate::accounting {
namespace {

constexpr const char* kDimList = "tenant, model, region, gpu, provider, tier, backend";

std::optional<ShowbackDim> DimByName(std::string_view name) {
  for (size_t i = 0; i < kShowbackDims; ++i) {
    auto d = static_cast<ShowbackDim>(i);
    if (name == ShowbackDimName(d)) return d;
  }
  return std::nullopt;
}

std::vector<std::string> SplitList(std::string_view value) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(ToAbsl(value), ',', absl::SkipEmpty()))
    out.emplace_back(part.data(), part.size());
  return out;
}

/// Unix seconds, RFC 3339, or a date at midnight UTC -> unix ms.
absl::StatusOr<int64_t> ParseInstant(std::string_view name, std::string_view text) {
  if (text.empty())
    return absl::InvalidArgumentError(absl::StrCat("'", ToAbsl(name), "' is empty"));
  size_t digits_from = text.front() == '-' ? 1 : 0;
  bool all_digits = text.size() > digits_from &&
                    std::all_of(text.begin() + static_cast<ptrdiff_t>(digits_from), text.end(),
                                [](char c) { return c >= '0' && c <= '9'; });
  if (all_digits) {
    int64_t seconds = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), seconds);
    // Years beyond ~5000 are typos, and keep * 1000 far from overflow.
    constexpr int64_t kMaxSeconds = 100'000'000'000;
    if (r.ec != std::errc() || seconds > kMaxSeconds || seconds < -kMaxSeconds) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", ToAbsl(name), "' is out of range: ", ToAbsl(text)));
    }
    return seconds * 1000;
  }
  absl::Time t;
  std::string err;
  if (absl::ParseTime(absl::RFC3339_full, ToAbsl(text), &t, &err) ||
      absl::ParseTime("%Y-%m-%d", ToAbsl(text), absl::UTCTimeZone(), &t, &err)) {
    return absl::ToUnixMillis(t);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", ToAbsl(name), "' must be RFC 3339 (2025-03-01T00:00:00Z), a date (2025-03-01) ",
      "or unix seconds, got '", ToAbsl(text), "'"));
}

bool ParseBool(std::string_view v, bool& out) {
  if (v == "true" || v == "1") {
    out = true;
    return true;
  }
  if (v == "false" || v == "0") {
    out = false;
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<ShowbackQuery> ParseShowbackQuery(std::string_view query_string, int64_t now_ms) {
  if (!query_string.empty() && query_string.front() == '?') query_string.remove_prefix(1);
  auto parsed =
      boost::urls::parse_query(boost::urls::string_view(query_string.data(), query_string.size()));
  if (!parsed) return absl::InvalidArgumentError("malformed query string");
  boost::urls::params_view params = *parsed;

  ShowbackQuery q;
  std::optional<int64_t> from, to;
  std::vector<std::string> seen;
  for (const boost::urls::param& p : params) {
    const std::string& key = p.key;
    const std::string& value = p.value;
    if (key.empty() && !p.has_value) continue;  // "a=1&&b=2"
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' given twice"));
    seen.push_back(key);
    if (key == "from" || key == "to") {
      auto t = ParseInstant(key, value);
      if (!t.ok()) return t.status();
      (key == "from" ? from : to) = *t;
    } else if (key == "group_by") {
      for (const std::string& name : SplitList(value)) {
        auto d = DimByName(name);
        if (!d) {
          return absl::InvalidArgumentError(
              absl::StrCat("unknown group_by key '", name, "' (known: ", kDimList, ")"));
        }
        if (std::find(q.group_by.begin(), q.group_by.end(), *d) == q.group_by.end())
          q.group_by.push_back(*d);
      }
    } else if (key == "format") {
      if (value == "json") {
        q.format = ShowbackFormat::kJson;
      } else if (value == "csv") {
        q.format = ShowbackFormat::kCsv;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("'format' must be json or csv, got '", value, "'"));
      }
    } else if (key == "live") {
      if (!ParseBool(value, q.live)) {
        return absl::InvalidArgumentError(
            absl::StrCat("'live' must be true or false, got '", value, "'"));
      }
    } else if (auto d = DimByName(key)) {
      q.filters[static_cast<size_t>(*d)] = SplitList(value);
      if (q.filters[static_cast<size_t>(*d)].empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("filter '", key, "' needs at least one value"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown parameter '", key,
          "' (known: from, to, group_by, format, live, and the filters ", kDimList, ")"));
    }
  }
  q.to_ms = to.value_or(now_ms);
  q.from_ms = from.value_or(q.to_ms - kDefaultShowbackRangeMs);
  if (q.from_ms >= q.to_ms) {
    return absl::InvalidArgumentError(absl::StrCat("'from' (", FormatRfc3339(q.from_ms),
                                                   ") must be before 'to' (",
                                                   FormatRfc3339(q.to_ms), ")"));
  }
  return q;
}

void ShowbackAggregator::Add(int64_t minute_ms, const ShowbackDimsView& dims,
                             const ShowbackUsage& usage) {
  if (!InRange(minute_ms)) return;
  for (size_t i = 0; i < kShowbackDims; ++i) {
    const std::vector<std::string>& allowed = query_.filters[i];
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), dims[i]) == allowed.end())
      return;
  }
  std::vector<std::string> group;
  group.reserve(query_.group_by.size());
  for (ShowbackDim d : query_.group_by)
    group.emplace_back(dims[static_cast<size_t>(d)]);
  groups_[std::move(group)].Add(usage);
  totals_.Add(usage);
}

ShowbackResult ShowbackAggregator::Finish() && {
  ShowbackResult r;
  r.from_ms = query_.from_ms;
  r.to_ms = query_.to_ms;
  r.group_by = query_.group_by;
  r.totals = totals_;
  r.rows.reserve(groups_.size());
  for (auto& [group, usage] : groups_)
    r.rows.push_back(ShowbackRow{group, usage});
  std::sort(r.rows.begin(), r.rows.end(), [](const ShowbackRow& a, const ShowbackRow& b) {
    if (a.usage.cost != b.usage.cost) return a.usage.cost > b.usage.cost;
    return a.group < b.group;
  });
  return r;
}

}  // namespace geogate::accounting
