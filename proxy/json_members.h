// Reads chosen members of a JSON object without building a document.
//
// The hot path needs a few facts from JSON it forwards: the request body's
// model, stream and stream_options.include_usage, a non-streamed answer's
// usage counts, and a Responses API stream's response.usage counts. Building a Boost.JSON document
// of the whole text (every message, every choice) to read three members was most of the parsing
// cost per request. This reader runs Boost.JSON's validating SAX parser (basic_parser) over the
// text once and reports only the members asked for, by path, at the first three levels of the
// top-level object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <absl/functional/function_ref.h>
#include <boost/system/error_code.hpp>

namespace geogate::proxy {

/// A member to report: `key` of the top-level object when `parent` is
/// empty, else `key` of the object that is the top-level member `parent`;
/// when `within` is set, `parent` is a member of the top-level object
/// `within` instead ({"usage", "input_tokens", "response"} is
/// response.usage.input_tokens).
struct JsonMemberPath {
  std::string_view parent;
  std::string_view key;
  std::string_view within = {};
};

/// The value of a reported member. Strings are unescaped; `text` is valid
/// only during the callback. Containers are reported when they begin.
struct JsonMemberValue {
  enum class Kind { kString, kBool, kInt64, kUint64, kDouble, kNull, kObject, kArray };
  Kind kind = Kind::kNull;
  std::string_view text;
  bool boolean = false;
  int64_t int64 = 0;
  uint64_t uint64 = 0;
  double number = 0;
};

enum class JsonTopLevel { kInvalid, kNotObject, kObject };

/// Parses all of `text` (Boost.JSON's default limits: standard JSON, depth
/// 32, no trailing data) and calls `on_member(index into paths, value)`
/// for each member found at one of `paths`, in document order; a
/// repeated member is reported each time (the last one is the one
/// Boost.JSON's document would keep). Members are reported as the parse
/// goes: a caller must discard what it saw when the result is kInvalid.
/// @return kInvalid with `ec` set when `text` is not one JSON value.
JsonTopLevel ReadJsonMembers(std::string_view text, std::span<const JsonMemberPath> paths,
                             absl::FunctionRef<void(size_t, const JsonMemberValue&)> on_member,
                             boost::system::error_code& ec);

/// The raw text of the value of the top-level object's last member named
/// `key`, found by scanning `text` back from its end, for a member that
/// sits near the end of a large object (a non-streamed answer's `usage`,
/// after its choices): only the members after it are walked, and nothing
/// is parsed or validated, the caller parses the value it gets. The last
/// member of that name is the one a parsed document keeps. Keys are
/// compared as written (a key spelled with escapes does not match).
/// @return nullopt when `text` does not begin and end as an object (but
///         for whitespace), the object has no such member, or the scan
///         meets its start first; the value without surrounding whitespace
///         otherwise.
std::optional<std::string_view> LastTopLevelMember(std::string_view text, std::string_view key);

/// LastTopLevelMember over `tail`, the end of a text whose beginning the
/// caller checked (its first non-space character opened an object) and no
/// longer holds: for a non-streamed answer too large to keep whole. The
/// member must lie wholly in `tail`; a scan that reaches the tail's start,
/// or a string there whose escaping it cannot see, gives nullopt.
std::optional<std::string_view> LastTopLevelMemberOfTail(std::string_view tail,
                                                         std::string_view key);

}  // namespace geogate::proxy
