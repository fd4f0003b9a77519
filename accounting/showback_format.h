// Showback query results as the admin endpoint serves them: JSON for tools,
// CSV for spreadsheets (docs/showback.md, "Query API").
#pragma once

#include <string>

#include "accounting/showback_query.h"

namespace geogate::accounting {

/// `{"from","to","group_by":[...],"rows":[{...}],"totals":{...}}`; from and
/// to as RFC 3339 UTC, each row with its group values under the dimension
/// names, then the usage fields.
std::string FormatShowbackJson(const ShowbackResult& result);

/// RFC 4180 CSV: CRLF line ends; a field is quoted when it holds ',', '"',
/// CR or LF, with quotes doubled. A header line (the group_by dimensions,
/// then the usage fields), then one line per row. No totals line, so a
/// spreadsheet's column sums stay right.
std::string FormatShowbackCsv(const ShowbackResult& result);

/// The usage fields of a row, in output order.
inline constexpr const char* kShowbackUsageFields[] = {
    "requests",
    "estimated_requests",
    "prompt_tokens",
    "completion_tokens",
    "estimated_prompt_tokens",
    "estimated_completion_tokens",
    "estimated_share",
    "gpu_seconds",
    "cost",
};

}  // namespace geogate::accounting
