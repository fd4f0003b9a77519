#include "gateway/request_body.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace geogate::gateway {

namespace json = boost::json;

RequestBody RequestBody::Parse(std::string_view body, json::storage_ptr storage) {
  RequestBody out(storage);  // doc_ in `storage`, so the parse result moves in without a copy
  boost::system::error_code ec;
  out.doc_ = json::parse(json::string_view(body.data(), body.size()), ec, std::move(storage));
  if (ec) {
    out.facts_.status = BodyFacts::Status::kInvalidJson;
    out.facts_.error = "request body is not valid JSON: " + ec.message();
    return out;
  }
  const json::object* obj = out.doc_.if_object();
  if (obj == nullptr) {
    out.facts_.status = BodyFacts::Status::kNotObject;
    out.facts_.error = "request body must be a JSON object";
    return out;
  }
  const json::value* model = obj->if_contains("model");
  if (model == nullptr || !model->is_string() || model->get_string().empty()) {
    out.facts_.status = BodyFacts::Status::kMissingModel;
    out.facts_.error = model == nullptr ? "you must provide a model parameter"
                                        : "'model' must be a non-empty string";
    return out;
  }
  out.facts_.model.assign(model->get_string().data(), model->get_string().size());
  if (const json::value* s = obj->if_contains("stream"); s != nullptr && s->is_bool())
    out.facts_.stream = s->get_bool();
  if (const json::value* so = obj->if_contains("stream_options");
      so != nullptr && so->is_object()) {
    if (const json::value* iu = so->get_object().if_contains("include_usage");
        iu != nullptr && iu->is_bool())
      out.facts_.include_usage = iu->get_bool();
  }
  return out;
}

std::optional<std::string> RequestBody::Rewrite(std::string_view canonical_model,
                                                bool request_usage) const {
  const json::object* obj = doc_.if_object();
  if (obj == nullptr) return std::nullopt;
  bool rename = facts_.model != canonical_model;
  bool add_usage = request_usage && facts_.stream && !facts_.include_usage;
  if (!rename && !add_usage) return std::nullopt;
  json::object copy = *obj;
  if (rename) copy["model"] = json::string(canonical_model.data(), canonical_model.size());
  if (add_usage) {
    json::value& so = copy["stream_options"];
    if (!so.is_object()) so = json::object();
    so.get_object()["include_usage"] = true;
  }
  return json::serialize(copy);
}

}  // namespace geogate::gateway
