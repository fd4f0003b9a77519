// The facts the gateway needs from an OpenAI request body (model, stream,
// stream_options.include_usage), and the rewrite sent upstream when the
// model was named by an alias or usage reporting must be requested.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/block_cache.h"

namespace geogate::proxy {

struct BodyFacts {
  enum class Status { kOk, kInvalidJson, kNotObject, kMissingModel };
  Status status = Status::kOk;
  /// A view into the body, or into the RequestBody's own copy when the
  /// name was written with escapes: no allocation for the common case.
  std::string_view model;
  bool stream = false;
  bool include_usage = false;  // the client asked for the usage chunk
  std::string error;           // what was wrong, for the error message
};

class RequestBody {
 public:
  /// Validates `body` and reads the facts without building a document
  /// (proxy/json_members.h). Never throws. A body that repeats one of
  /// the members above (however its key is escaped) is kInvalidJson. `body` must outlive this
  /// object: Rewrite reads it again.
  static RequestBody Parse(std::string_view body);

  const BodyFacts& facts() const { return facts_; }

  /// The body to send upstream: the original bytes when nothing changes,
  /// else the body with `model` set to `canonical_model` and, when
  /// `request_usage`, `stream_options.include_usage = true` (spliced into
  /// the original bytes when that member is all there is to add, else a
  /// re-serialised document).
  /// @return nullopt when the original bytes can be forwarded unchanged.
  std::optional<common::PooledString> Rewrite(std::string_view canonical_model,
                                              bool request_usage) const;

 private:
  explicit RequestBody(std::string_view body) : body_(body) {}
  void SetModel(std::string_view name);

  BodyFacts facts_;
  std::string_view body_;
  bool has_stream_options_ = false;
  std::unique_ptr<std::string> unescaped_model_;  // only for names with escapes
};

}  // namespace geogate::proxy
