#include "proxy/request_body.h"

#include <array>
#include <cstdint>
#include <functional>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "proxy/json_members.h"

namespace geogate::proxy {

namespace json = boost::json;

namespace {

enum Member : size_t { kModel, kStream, kStreamOptions, kIncludeUsage };
constexpr std::array<JsonMemberPath, 4> kMembers = {{
    {"", "model"},
    {"", "stream"},
    {"", "stream_options"},
    {"stream_options", "include_usage"},
}};

}  // namespace

RequestBody RequestBody::Parse(std::string_view body) {
  RequestBody out(body);
  BodyFacts& f = out.facts_;
  // Each member is reported every time it appears. A member the gateway
  // decides on may appear once: JSON parsers disagree on which copy of a
  // repeated name wins (RFC 8259 4 leaves it open), so a body routed on
  // one model could be served by the backend as another. Keys arrive
  // unescaped, so "mod\u0065l" is "model" here as in any backend.
  bool has_model = false, model_is_string = false;
  uint32_t seen = 0;  // bit per kMembers index
  std::string_view repeated;
  f.model = {};
  boost::system::error_code ec;
  JsonTopLevel top = ReadJsonMembers(
      body, kMembers,
      [&](size_t member, const JsonMemberValue& v) {
        uint32_t bit = uint32_t{1} << member;
        if ((seen & bit) != 0 && repeated.empty()) repeated = kMembers[member].key;
        seen |= bit;
        bool is_bool = v.kind == JsonMemberValue::Kind::kBool;
        switch (member) {
          case kModel:
            has_model = true;
            model_is_string = v.kind == JsonMemberValue::Kind::kString;
            if (model_is_string) out.SetModel(v.text);
            break;
          case kStream:
            f.stream = is_bool && v.boolean;
            break;
          case kStreamOptions:
            out.has_stream_options_ = true;
            break;
          case kIncludeUsage:
            f.include_usage = is_bool && v.boolean;
            break;
        }
      },
      ec);
  if (top == JsonTopLevel::kInvalid) {
    out.facts_ = BodyFacts{};
    out.facts_.status = BodyFacts::Status::kInvalidJson;
    out.facts_.error = "request body is not valid JSON: " + ec.message();
    return out;
  }
  if (top == JsonTopLevel::kNotObject) {
    out.facts_ = BodyFacts{};
    out.facts_.status = BodyFacts::Status::kNotObject;
    out.facts_.error = "request body must be a JSON object";
    return out;
  }
  if (!repeated.empty()) {
    out.facts_ = BodyFacts{};
    out.facts_.status = BodyFacts::Status::kInvalidJson;
    out.facts_.error = "request body has the member '" + std::string(repeated) +
                       "' more than once (backends may read either copy)";
    return out;
  }
  if (!has_model || !model_is_string || f.model.empty()) {
    f.status = BodyFacts::Status::kMissingModel;
    f.error =
        !has_model ? "you must provide a model parameter" : "'model' must be a non-empty string";
  }
  return out;
}

// The parser hands an unescaped string as a view of the input, which the
// body outlives; anything else (escapes, a name split into parts) is
// copied once.
void RequestBody::SetModel(std::string_view name) {
  std::less<const char*> before;
  bool in_body = !before(name.data(), body_.data()) &&
                 !before(body_.data() + body_.size(), name.data() + name.size());
  if (in_body) {
    facts_.model = name;
    return;
  }
  if (!unescaped_model_) unescaped_model_ = std::make_unique<std::string>();
  unescaped_model_->assign(name);
  facts_.model = *unescaped_model_;
}

std::optional<common::PooledString> RequestBody::Rewrite(std::string_view canonical_model,
                                                         bool request_usage) const {
  if (facts_.status != BodyFacts::Status::kOk) return std::nullopt;
  bool rename = facts_.model != canonical_model;
  bool add_usage = request_usage && facts_.stream && !facts_.include_usage;
  if (!rename && !add_usage) return std::nullopt;
  if (!rename && !has_stream_options_) {
    // The common streamed case: one member to add, spliced in before the
    // object's closing brace (the body is a valid object with a model,
    // so it ends in '}' and the new member follows another one).
    size_t close = body_.find_last_not_of(" \t\r\n");
    common::PooledString out;
    out.reserve(body_.size() + 40);
    out.append(body_.substr(0, close));
    out += R"(,"stream_options":{"include_usage":true})";
    out.append(body_.substr(close));
    return out;
  }
  // Otherwise re-serialise a document of the body (aliases, or a
  // stream_options object to amend), built in an arena on this stack
  // frame: a typical chat request's document needs no allocation.
  unsigned char first_block[4096];
  json::monotonic_resource arena(first_block, sizeof first_block);
  boost::system::error_code ec;
  json::value doc = json::parse(json::string_view(body_.data(), body_.size()), ec, &arena);
  json::object* obj = doc.if_object();
  if (ec || obj == nullptr) return std::nullopt;  // not reached: Parse validated it
  if (rename) (*obj)["model"] = json::string(canonical_model.data(), canonical_model.size());
  if (add_usage) {
    json::value& so = (*obj)["stream_options"];
    if (!so.is_object()) so = json::object();
    so.get_object()["include_usage"] = true;
  }
  std::string text = json::serialize(doc);
  return common::PooledString(text.data(), text.size());
}

}  // namespace geogate::proxy
