#include "accounting/showback_format.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "accounting/showback_line.h"
#include "common/json.h"

namespace geogate::accounting {
namespace {

namespace json = boost::json;

/// The value of usage field `i` of kShowbackUsageFields.
json::value UsageField(const ShowbackUsage& u, size_t i) {
  switch (i) {
    case 0:
      return u.requests;
    case 1:
      return u.estimated_requests;
    case 2:
      return u.prompt_tokens();
    case 3:
      return u.completion_tokens();
    case 4:
      return u.estimated_prompt_tokens;
    case 5:
      return u.estimated_completion_tokens;
    case 6:
      return u.estimated_share();
    case 7:
      return u.gpu_seconds;
    case 8:
      return u.cost;
  }
  return nullptr;
}

constexpr size_t kUsageFields = std::size(kShowbackUsageFields);

void AddUsage(json::object& out, const ShowbackUsage& u) {
  for (size_t i = 0; i < kUsageFields; ++i)
    out.emplace(kShowbackUsageFields[i], UsageField(u, i));
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
  json::array group_by;
  for (ShowbackDim d : r.group_by)
    group_by.emplace_back(ShowbackDimName(d));
  json::array rows;
  for (const ShowbackRow& x : r.rows) {
    json::object row;
    for (size_t i = 0; i < r.group_by.size(); ++i)
      row.emplace(ShowbackDimName(r.group_by[i]), x.group[i]);
    AddUsage(row, x.usage);
    rows.emplace_back(std::move(row));
  }
  json::object totals;
  AddUsage(totals, r.totals);
  // emplace, not an initializer list: those copy, and rows may be many.
  json::object doc;
  doc.emplace("from", FormatRfc3339(r.from_ms));
  doc.emplace("to", FormatRfc3339(r.to_ms));
  doc.emplace("group_by", std::move(group_by));
  doc.emplace("rows", std::move(rows));
  doc.emplace("totals", std::move(totals));
  return common::SerializeJson(doc);
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
      out += common::SerializeJson(UsageField(x.usage, i));  // a number, as in the JSON
    }
    out += "\r\n";
  }
  return out;
}

}  // namespace geogate::accounting
