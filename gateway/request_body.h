// The facts the gateway needs from an OpenAI request body (model, stream,
// stream_options.include_usage), and the rewrite sent upstream when the
// model was named by an alias or usage reporting must be requested.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/json/value.hpp>

namespace geogate::gateway {

struct BodyFacts {
  enum class Status { kOk, kInvalidJson, kNotObject, kMissingModel };
  Status status = Status::kOk;
  std::string model;
  bool stream = false;
  bool include_usage = false;  // the client asked for the usage chunk
  std::string error;           // what was wrong, for the error message
};

class RequestBody {
 public:
  /// Parses `body` (Boost.JSON) and extracts the facts. Never throws. The
  /// document lives in `storage` (the default heap when null); a
  /// request-scoped monotonic arena saves the allocation per JSON node.
  static RequestBody Parse(std::string_view body, boost::json::storage_ptr storage = {});

  const BodyFacts& facts() const { return facts_; }

  /// The body to send upstream: the original bytes when nothing changes,
  /// else a re-serialised document with `model` set to `canonical_model`
  /// and, when `request_usage`, `stream_options.include_usage = true`.
  /// @return nullopt when the original bytes can be forwarded unchanged.
  std::optional<std::string> Rewrite(std::string_view canonical_model, bool request_usage) const;

 private:
  explicit RequestBody(boost::json::storage_ptr storage) : doc_(std::move(storage)) {}

  BodyFacts facts_;
  boost::json::value doc_;
};

}  // namespace geogate::gateway
