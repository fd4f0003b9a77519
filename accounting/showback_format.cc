#include "accounting/showback_format.h"

#include <charconv>

#include "accounting/showback_line.h"
#include "common/json_text.h"

namespace geogate::gateway {
namespace {

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

/// Appends the value of usage field `i` of kShowbackUsageFields.
void AppendUsageField(std::string& out, const ShowbackUsage& u, size_t i) {
  switch (i) {
    case 0:
      return AppendInt(out, static_cast<int64_t>(u.requests));
    case 1:
      return AppendInt(out, static_cast<int64_t>(u.estimated_requests));
    case 2:
      return AppendInt(out, u.prompt_tokens());
    case 3:
      return AppendInt(out, u.completion_tokens());
    case 4:
      return AppendInt(out, u.estimated_prompt_tokens);
    case 5:
      return AppendInt(out, u.estimated_completion_tokens);
    case 6:
      return AppendNumber(out, u.estimated_share());
    case 7:
      return AppendNumber(out, u.gpu_seconds);
    case 8:
      return AppendNumber(out, u.cost);
  }
}

constexpr size_t kUsageFields = std::size(kShowbackUsageFields);

void AppendUsageJson(std::string& out, const ShowbackUsage& u, bool first) {
  for (size_t i = 0; i < kUsageFields; ++i) {
    if (!first || i > 0) out += ',';
    out += '"';
    out += kShowbackUsageFields[i];
    out += "\":";
    AppendUsageField(out, u, i);
  }
}

void AppendCsvField(std::string& out, std::string_view v) {
  if (v.find_first_of(",\"\r\n") == std::string_view::npos) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

}  // namespace

std::string FormatShowbackJson(const ShowbackResult& r) {
  std::string out = "{\"from\":\"";
  out += FormatRfc3339(r.from_ms);
  out += "\",\"to\":\"";
  out += FormatRfc3339(r.to_ms);
  out += "\",\"group_by\":[";
  for (size_t i = 0; i < r.group_by.size(); ++i) {
    if (i > 0) out += ',';
    AppendJsonString(out, ShowbackDimName(r.group_by[i]));
  }
  out += "],\"rows\":[";
  for (size_t row = 0; row < r.rows.size(); ++row) {
    if (row > 0) out += ',';
    out += '{';
    const ShowbackRow& x = r.rows[row];
    for (size_t i = 0; i < r.group_by.size(); ++i) {
      if (i > 0) out += ',';
      AppendJsonString(out, ShowbackDimName(r.group_by[i]));
      out += ':';
      AppendJsonString(out, x.group[i]);
    }
    AppendUsageJson(out, x.usage, r.group_by.empty());
    out += '}';
  }
  out += "],\"totals\":{";
  AppendUsageJson(out, r.totals, true);
  out += "}}";
  return out;
}

std::string FormatShowbackCsv(const ShowbackResult& r) {
  std::string out;
  for (ShowbackDim d : r.group_by) {
    out += ShowbackDimName(d);
    out += ',';
  }
  for (size_t i = 0; i < kUsageFields; ++i) {
    if (i > 0) out += ',';
    out += kShowbackUsageFields[i];
  }
  out += "\r\n";
  for (const ShowbackRow& x : r.rows) {
    for (const std::string& v : x.group) {
      AppendCsvField(out, v);
      out += ',';
    }
    for (size_t i = 0; i < kUsageFields; ++i) {
      if (i > 0) out += ',';
      AppendUsageField(out, x.usage, i);
    }
    out += "\r\n";
  }
  return out;
}

}  // namespace geogate::gateway
