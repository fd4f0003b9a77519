#include "proxy/json_members.h"

#include <cstring>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/error.hpp>

namespace geogate::proxy {

namespace json = boost::json;

namespace {

using Value = JsonMemberValue;
constexpr size_t kNoMatch = static_cast<size_t>(-1);

template <class Field, class T>
Value Of(Value::Kind kind, Field Value::*field, T x) {
  Value v;
  v.kind = kind;
  v.*field = x;
  return v;
}

Value Of(Value::Kind kind) {
  Value v;
  v.kind = kind;
  return v;
}

// Keys longer than this are never looked for (the paths are names like
// "stream_options"); such a key only has to not match.
constexpr size_t kMaxKey = 64;

class Key {
 public:
  void Clear() { size_ = 0; }
  void Append(json::string_view part) {
    if (size_ + part.size() > kMaxKey) {
      size_ = kMaxKey + 1;  // too long to be one of the paths
      return;
    }
    std::memcpy(text_ + size_, part.data(), part.size());
    size_ += part.size();
  }
  bool Is(std::string_view name) const {
    return size_ <= kMaxKey && std::string_view(text_, size_) == name;
  }

 private:
  char text_[kMaxKey];
  size_t size_ = 0;
};

class Handler {
 public:
  static constexpr std::size_t max_array_size = -1;
  static constexpr std::size_t max_object_size = -1;
  static constexpr std::size_t max_string_size = -1;
  static constexpr std::size_t max_key_size = -1;

  Handler(std::span<const JsonMemberPath> paths,
          absl::FunctionRef<void(size_t, const Value&)> on_member)
      : paths_(paths), on_member_(on_member) {}

  JsonTopLevel top() const { return top_; }

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }

  bool on_object_begin(boost::system::error_code&) { return Open(/*object=*/true); }
  bool on_array_begin(boost::system::error_code&) { return Open(/*object=*/false); }
  bool on_object_end(std::size_t, boost::system::error_code&) { return Close(); }
  bool on_array_end(std::size_t, boost::system::error_code&) { return Close(); }

  bool on_key_part(json::string_view s, std::size_t n, boost::system::error_code&) {
    if (depth_ > kLevels) return true;
    if (n == s.size()) keys_[depth_].Clear();  // the first part
    keys_[depth_].Append(s);
    return true;
  }
  bool on_key(json::string_view s, std::size_t n, boost::system::error_code& ec) {
    return on_key_part(s, n, ec);
  }

  bool on_string_part(json::string_view s, std::size_t n, boost::system::error_code&) {
    if (n == s.size()) {  // the first part
      string_match_ = Match();
      string_.clear();
    }
    if (string_match_ != kNoMatch) string_.append(s.data(), s.size());
    return true;
  }
  bool on_string(json::string_view s, std::size_t n, boost::system::error_code&) {
    if (n == s.size()) {  // in one piece: report the parser's view, no copy
      Scalar(Of(Value::Kind::kString, &Value::text, std::string_view(s.data(), s.size())));
      return true;
    }
    if (string_match_ != kNoMatch) {
      string_.append(s.data(), s.size());
      on_member_(string_match_, Of(Value::Kind::kString, &Value::text, std::string_view(string_)));
    }
    return true;
  }

  bool on_number_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_int64(int64_t i, json::string_view, boost::system::error_code&) {
    Scalar(Of(Value::Kind::kInt64, &Value::int64, i));
    return true;
  }
  bool on_uint64(uint64_t u, json::string_view, boost::system::error_code&) {
    Scalar(Of(Value::Kind::kUint64, &Value::uint64, u));
    return true;
  }
  bool on_double(double d, json::string_view, boost::system::error_code&) {
    Scalar(Of(Value::Kind::kDouble, &Value::number, d));
    return true;
  }
  bool on_bool(bool b, boost::system::error_code&) {
    Scalar(Of(Value::Kind::kBool, &Value::boolean, b));
    return true;
  }
  bool on_null(boost::system::error_code&) {
    Scalar(Of(Value::Kind::kNull));
    return true;
  }
  bool on_comment_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(json::string_view, boost::system::error_code&) { return true; }

 private:
  // A container begins: at the top it decides the shape, below it is a
  // member value like any other.
  bool Open(bool object) {
    if (depth_ == 0)
      top_ = object ? JsonTopLevel::kObject : JsonTopLevel::kNotObject;
    else
      Report(Of(object ? Value::Kind::kObject : Value::Kind::kArray));
    if (depth_ < kLevels) is_object_[depth_] = object;
    ++depth_;
    return true;
  }
  bool Close() {
    --depth_;
    return true;
  }

  // The path index of the value that starts now, if it is asked for.
  size_t Match() const {
    if (depth_ == 1 && is_object_[0]) {
      for (size_t i = 0; i < paths_.size(); ++i)
        if (paths_[i].parent.empty() && paths_[i].within.empty() && keys_[1].Is(paths_[i].key))
          return i;
    } else if (depth_ == 2 && is_object_[0] && is_object_[1]) {
      for (size_t i = 0; i < paths_.size(); ++i)
        if (!paths_[i].parent.empty() && paths_[i].within.empty() &&
            keys_[1].Is(paths_[i].parent) && keys_[2].Is(paths_[i].key))
          return i;
    } else if (depth_ == 3 && is_object_[0] && is_object_[1] && is_object_[2]) {
      for (size_t i = 0; i < paths_.size(); ++i)
        if (!paths_[i].within.empty() && keys_[1].Is(paths_[i].within) &&
            keys_[2].Is(paths_[i].parent) && keys_[3].Is(paths_[i].key))
          return i;
    }
    return kNoMatch;
  }

  void Report(const Value& v) {
    if (size_t i = Match(); i != kNoMatch) on_member_(i, v);
  }
  void Scalar(const Value& v) {
    if (depth_ == 0) top_ = JsonTopLevel::kNotObject;
    Report(v);
  }

  std::span<const JsonMemberPath> paths_;
  absl::FunctionRef<void(size_t, const Value&)> on_member_;
  JsonTopLevel top_ = JsonTopLevel::kInvalid;
  // Paths reach members of containers this deep (the top level is 0).
  static constexpr size_t kLevels = 3;
  size_t depth_ = 0;                // containers open
  bool is_object_[kLevels] = {};    // the container at each of the first levels
  Key keys_[kLevels + 1];           // the current key at levels 1 to kLevels
  size_t string_match_ = kNoMatch;  // of the string arriving in parts
  std::string string_;              // its parts, when asked for
};

}  // namespace

JsonTopLevel ReadJsonMembers(std::string_view text, std::span<const JsonMemberPath> paths,
                             absl::FunctionRef<void(size_t, const JsonMemberValue&)> on_member,
                             boost::system::error_code& ec) {
  json::basic_parser<Handler> parser(json::parse_options(), paths, on_member);
  size_t n = parser.write_some(/*more=*/false, text.data(), text.size(), ec);
  if (!ec && n < text.size()) ec = json::error::extra_data;
  if (ec) return JsonTopLevel::kInvalid;
  return parser.handler().top();
}

namespace {

bool IsJsonSpace(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The position of the quote that opens the string whose closing quote is at
// `close`, or npos: the nearest quote before it that is not escaped (not
// preceded by an odd number of backslashes).
size_t StringStart(std::string_view text, size_t close) {
  size_t i = close;
  while (i > 0) {
    i = text.rfind('"', i - 1);
    if (i == std::string_view::npos) return i;
    size_t slashes = 0;
    while (slashes < i && text[i - 1 - slashes] == '\\')
      ++slashes;
    if (slashes % 2 == 0) return i;
  }
  return std::string_view::npos;
}

std::string_view TrimJsonSpace(std::string_view v) {
  while (!v.empty() && IsJsonSpace(v.front()))
    v.remove_prefix(1);
  while (!v.empty() && IsJsonSpace(v.back()))
    v.remove_suffix(1);
  return v;
}

}  // namespace

namespace {

// Whether nothing but backslashes come before `pos` in `text`: in a tail
// cut from a longer text, whether the quote at `pos` is escaped is unknown.
bool OnlyBackslashesBefore(std::string_view text, size_t pos) {
  while (pos > 0 && text[pos - 1] == '\\')
    --pos;
  return pos == 0;
}

// LastTopLevelMember's scan from the end of `text`, whose last non-space
// character must close the top-level object. `cut`: `text` is the tail of a
// longer one, so a string whose opening quote's escaping it cannot see ends
// the scan (nullopt).
std::optional<std::string_view> ScanBackForMember(std::string_view text, std::string_view key,
                                                  bool cut) {
  size_t i = text.size();
  while (i > 0 && IsJsonSpace(text[i - 1]))
    --i;
  if (i == 0 || text[i - 1] != '}') return std::nullopt;
  size_t value_end = --i;  // the top-level object's '}': the last member's value ends there
  size_t colon = std::string_view::npos;  // of the member being walked, once passed
  int depth = 0;                          // of containers inside the top-level object
  while (i > 0) {
    char c = text[--i];
    switch (c) {
      case '"': {
        size_t open = StringStart(text, i);
        if (open == std::string_view::npos || (cut && OnlyBackslashesBefore(text, open)))
          return std::nullopt;
        if (depth == 0 && colon != std::string_view::npos) {
          // The member's key: the string before its colon.
          if (text.substr(open + 1, i - open - 1) == key)
            return TrimJsonSpace(text.substr(colon + 1, value_end - colon - 1));
          colon = std::string_view::npos;
        }
        i = open;
        break;
      }
      case '}':
      case ']':
        ++depth;
        break;
      case '{':
      case '[':
        if (depth == 0) return std::nullopt;  // the top-level object's start
        --depth;
        break;
      case ':':
        if (depth == 0) colon = i;
        break;
      case ',':
        if (depth == 0) {
          value_end = i;
          colon = std::string_view::npos;
        }
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string_view> LastTopLevelMember(std::string_view text, std::string_view key) {
  size_t first = 0;
  while (first < text.size() && IsJsonSpace(text[first]))
    ++first;
  if (first == text.size() || text[first] != '{') return std::nullopt;
  // From the object's '{' on: the scan ends there at the latest.
  return ScanBackForMember(text.substr(first), key, /*cut=*/false);
}

std::optional<std::string_view> LastTopLevelMemberOfTail(std::string_view tail,
                                                         std::string_view key) {
  return ScanBackForMember(tail, key, /*cut=*/true);
}

}  // namespace geogate::proxy
