#include "accounting/showback_line.h"

#include <cmath>
#include <cstdint>
#include <optional>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/json.h"

namespace geogate::accounting {
namespace {

namespace json = boost::json;

constexpr int64_t kLineVersion = 1;

std::optional<int64_t> Int(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= static_cast<uint64_t>(INT64_MAX))
    return static_cast<int64_t>(v->get_uint64());
  return std::nullopt;
}

std::optional<double> Double(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_double()) return v->get_double();
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  return std::nullopt;
}

}  // namespace

std::string FormatRfc3339(int64_t unix_ms) {
  // absl's RFC3339_sec writes UTC as "+00:00"; "Z" is what people and
  // warehouses expect.
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

// Not the request path: one line per closed minute bucket, written when
// the store flushes, so Boost.JSON rather than a specialised writer.
void AppendShowbackLine(const ShowbackBucket& b, std::string_view edge, std::string& out) {
  json::object line{{"v", kLineVersion},
                    {"minute", FormatRfc3339(b.minute_ms)},
                    {"unix_ms", b.minute_ms},
                    {"edge", edge}};
  for (size_t i = 0; i < kShowbackDims; ++i)
    line.emplace(ShowbackDimName(static_cast<ShowbackDim>(i)), b.dims[i]);
  const ShowbackUsage& u = b.usage;
  line.emplace("requests", u.requests);
  line.emplace("estimated_requests", u.estimated_requests);
  line.emplace("reported_prompt_tokens", u.reported_prompt_tokens);
  line.emplace("reported_completion_tokens", u.reported_completion_tokens);
  line.emplace("estimated_prompt_tokens", u.estimated_prompt_tokens);
  line.emplace("estimated_completion_tokens", u.estimated_completion_tokens);
  line.emplace("gpu_seconds", u.gpu_seconds);
  line.emplace("cost", u.cost);
  out += common::SerializeJson(line);
  out += '\n';
}

absl::StatusOr<ShowbackBucket> ParseShowbackLine(std::string_view line) {
  boost::system::error_code ec;
  json::value v = json::parse(json::string_view(line.data(), line.size()), ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("not JSON: ", ec.message()));
  if (!v.is_object()) return absl::InvalidArgumentError("not a JSON object");
  const json::object& o = v.get_object();
  auto version = Int(o, "v");
  if (!version || *version != kLineVersion)
    return absl::InvalidArgumentError("missing or unsupported \"v\" (this reader knows 1)");
  ShowbackBucket b;
  auto minute = Int(o, "unix_ms");
  if (!minute) return absl::InvalidArgumentError("missing or non-integer \"unix_ms\"");
  b.minute_ms = MinuteOf(*minute);
  for (size_t i = 0; i < kShowbackDims; ++i) {
    const char* name = ShowbackDimName(static_cast<ShowbackDim>(i));
    const json::value* s = o.if_contains(name);
    if (s == nullptr || !s->is_string())
      return absl::InvalidArgumentError(absl::StrCat("missing or non-string \"", name, "\""));
    b.dims[i] = std::string(s->get_string().data(), s->get_string().size());
  }
  struct IntField {
    const char* name;
    int64_t* out;
  };
  int64_t requests = 0, estimated_requests = 0;
  ShowbackUsage& u = b.usage;
  for (IntField f :
       {IntField{"requests", &requests}, IntField{"estimated_requests", &estimated_requests},
        IntField{"reported_prompt_tokens", &u.reported_prompt_tokens},
        IntField{"reported_completion_tokens", &u.reported_completion_tokens},
        IntField{"estimated_prompt_tokens", &u.estimated_prompt_tokens},
        IntField{"estimated_completion_tokens", &u.estimated_completion_tokens}}) {
    auto x = Int(o, f.name);
    if (!x || *x < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("missing or negative integer \"", f.name, "\""));
    *f.out = *x;
  }
  u.requests = static_cast<uint64_t>(requests);
  u.estimated_requests = static_cast<uint64_t>(estimated_requests);
  auto gpu_seconds = Double(o, "gpu_seconds");
  auto cost = Double(o, "cost");
  if (!gpu_seconds || !std::isfinite(*gpu_seconds) || *gpu_seconds < 0)
    return absl::InvalidArgumentError("missing or negative \"gpu_seconds\"");
  if (!cost || !std::isfinite(*cost) || *cost < 0)
    return absl::InvalidArgumentError("missing or negative \"cost\"");
  u.gpu_seconds = *gpu_seconds;
  u.cost = *cost;
  return b;
}

}  // namespace geogate::accounting
