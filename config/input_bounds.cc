// CheckInputBounds: one pass over the text with TOML's lexical rules, keeping
// a stack of the arrays and inline tables open at each point.
//
// The scan must never stop where toml++ goes on, or a deep structure after
// that point would reach the parser unchecked. So it accepts at least what
// toml++ accepts (bytes >= 0x80 in bare keys, newlines in inline tables) and
// stops only where no TOML document can continue. The fuzz target
// (tests/fuzz/config_loader_fuzz.cc) checks the other direction: whatever
// passes the scan and parses is no deeper than the bound.
#include "config/input_bounds.h"

#include <array>
#include <vector>

#include "absl/strings/str_cat.h"

namespace geogate::config {
namespace {

bool IsBareKeyChar(char c) {
  auto u = static_cast<unsigned char>(c);
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || u >= 0x80;
}

class Scanner {
 public:
  explicit Scanner(std::string_view text) : s_(text) {}

  std::optional<InputBoundsProblem> Run() {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") i_ = line_start_ = 3;  // toml++ skips a BOM
    size_t table_depth = 0;  // of the last [table] or [[array]] header
    while (i_ < s_.size()) {
      SkipBlanks();
      if (i_ >= s_.size()) break;
      if (AtNewline()) {
        Newline();
        continue;
      }
      if (s_[i_] == '#') {
        SkipComment();
        continue;
      }
      Pos start = Here();
      if (s_[i_] == '[') {
        bool array = i_ + 1 < s_.size() && s_[i_ + 1] == '[';
        i_ += array ? 2 : 1;
        size_t parts = ScanKey();
        if (parts == 0) return std::nullopt;
        if (parts > kMaxNestingDepth) return Problem(start, "table header", parts);
        if (array) array_header_parts_[parts] = true;
        // Every array of tables on the path adds its element's level: [a.b]
        // below [[a]] is a table in a's last element, three levels down.
        // Which prefixes are arrays would need the keys' names; a prefix of
        // i parts can only be one if a [[header]] of i parts came before (or
        // is this one), so counting those lengths bounds the depth from above.
        size_t depth = parts;
        for (size_t n = 1; n <= parts; ++n)
          depth += array_header_parts_[n] ? 1 : 0;
        if (depth > kMaxNestingDepth) return Problem(start, "table header", depth);
        table_depth = depth;
        SkipBlanks();
        if (s_.substr(i_, array ? 2 : 1) != std::string_view("]]", array ? 2 : 1))
          return std::nullopt;
        i_ += array ? 2 : 1;
        continue;
      }
      size_t parts = ScanKey();
      if (parts == 0) return std::nullopt;
      size_t depth = table_depth + parts;
      if (depth > kMaxNestingDepth) return Problem(start, "key", depth);
      SkipBlanks();
      if (i_ >= s_.size() || s_[i_] != '=') return std::nullopt;
      ++i_;
      if (ScanValue(depth) != Step::kGoOn) return problem_;
    }
    return std::nullopt;
  }

 private:
  enum class Step { kGoOn, kStop };  // kStop: a problem was found or the text cannot go on
  struct Frame {
    bool inline_table;
    size_t depth;
  };

  Pos Here() const { return Pos{line_, static_cast<uint32_t>(i_ - line_start_ + 1)}; }

  std::optional<InputBoundsProblem> Problem(Pos at, std::string_view what, size_t depth) {
    problem_ =
        InputBoundsProblem{at, absl::StrCat(AV(what), " nested ", depth, " levels deep (at most ",
                                            kMaxNestingDepth, " are accepted)")};
    return problem_;
  }

  bool AtNewline() const {
    return s_[i_] == '\n' || (s_[i_] == '\r' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n');
  }
  void Newline() {
    i_ += s_[i_] == '\r' ? 2 : 1;
    ++line_;
    line_start_ = i_;
  }
  void SkipBlanks() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t'))
      ++i_;
  }
  void SkipComment() {
    while (i_ < s_.size() && !AtNewline())
      ++i_;
  }

  /// At a quote: skips the string (any of the four kinds). False when it does
  /// not end, which toml++ reports.
  bool SkipString() {
    const char q = s_[i_];
    const bool basic = q == '"';
    if (s_.substr(i_, 3) == std::string_view(basic ? "\"\"\"" : "'''")) {
      i_ += 3;
      while (i_ < s_.size()) {
        if (basic && s_[i_] == '\\') {
          ++i_;
          if (i_ >= s_.size()) return false;
          if (AtNewline())
            Newline();
          else
            ++i_;
          continue;
        }
        if (AtNewline()) {
          Newline();
          continue;
        }
        if (s_[i_] == q && s_.substr(i_, 3) == std::string_view(basic ? "\"\"\"" : "'''")) {
          i_ += 3;
          // Up to two more quotes belong to the content: """a"""" is 'a"'.
          for (int k = 0; k < 2 && i_ < s_.size() && s_[i_] == q; ++k)
            ++i_;
          return true;
        }
        ++i_;
      }
      return false;
    }
    ++i_;
    while (i_ < s_.size() && !AtNewline()) {
      if (basic && s_[i_] == '\\') {
        i_ += 2;
        continue;
      }
      if (s_[i_] == q) {
        ++i_;
        return true;
      }
      ++i_;
    }
    return false;
  }

  /// A (dotted) key: its number of parts, or 0 when there is none here.
  size_t ScanKey() {
    size_t parts = 0;
    for (;;) {
      SkipBlanks();
      if (i_ >= s_.size()) return 0;
      char c = s_[i_];
      if (c == '"' || c == '\'') {
        if (!SkipString()) return 0;
      } else if (IsBareKeyChar(c)) {
        while (i_ < s_.size() && IsBareKeyChar(s_[i_]))
          ++i_;
      } else {
        return 0;
      }
      ++parts;
      SkipBlanks();
      if (i_ < s_.size() && s_[i_] == '.') {
        ++i_;
        continue;
      }
      return parts;
    }
  }

  /// After '{' or ',' in an inline table: its next key and '=', or its '}'.
  Step InlineTableKey(size_t& value_depth) {
    for (;;) {
      SkipBlanks();
      if (i_ >= s_.size()) return Step::kStop;
      if (AtNewline()) {
        Newline();
        continue;
      }
      if (s_[i_] == '#') {
        SkipComment();
        continue;
      }
      break;
    }
    if (s_[i_] == '}') {
      ++i_;
      stack_.pop_back();
      return Step::kGoOn;
    }
    Pos start = Here();
    size_t parts = ScanKey();
    if (parts == 0) return Step::kStop;
    value_depth = stack_.back().depth + parts;
    if (value_depth > kMaxNestingDepth) {
      Problem(start, "key", value_depth);
      return Step::kStop;
    }
    SkipBlanks();
    if (i_ >= s_.size() || s_[i_] != '=') return Step::kStop;
    ++i_;
    return Step::kGoOn;
  }

  /// The value of a top-level key at `key_depth`, up to the newline that
  /// ends it (arrays may span lines).
  Step ScanValue(size_t key_depth) {
    stack_.clear();
    size_t value_depth = key_depth;  // of the next value outside an array
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t') {
        ++i_;
      } else if (AtNewline()) {
        if (stack_.empty()) return Step::kGoOn;
        Newline();
      } else if (c == '#') {
        SkipComment();
      } else if (c == '"' || c == '\'') {
        if (!SkipString()) return Step::kStop;
      } else if (c == '[' || c == '{') {
        size_t depth =
            !stack_.empty() && !stack_.back().inline_table ? stack_.back().depth + 1 : value_depth;
        if (depth > kMaxNestingDepth) {
          Problem(Here(), c == '[' ? "array" : "inline table", depth);
          return Step::kStop;
        }
        stack_.push_back(Frame{c == '{', depth});
        ++i_;
        if (c == '{' && InlineTableKey(value_depth) == Step::kStop) return Step::kStop;
      } else if (c == ']' || c == '}') {
        if (stack_.empty() || stack_.back().inline_table != (c == '}')) return Step::kStop;
        stack_.pop_back();
        ++i_;
      } else if (c == ',') {
        if (stack_.empty()) return Step::kStop;
        ++i_;
        if (stack_.back().inline_table && InlineTableKey(value_depth) == Step::kStop)
          return Step::kStop;
      } else if (c == '=') {
        return Step::kStop;
      } else {
        ++i_;  // part of a number, date, boolean...
      }
    }
    return Step::kGoOn;
  }

  std::string_view s_;
  size_t i_ = 0;
  uint32_t line_ = 1;
  size_t line_start_ = 0;
  std::vector<Frame> stack_;
  std::array<bool, kMaxNestingDepth + 1>
      array_header_parts_{};  // [i]: a [[header]] of i parts seen
  std::optional<InputBoundsProblem> problem_;
};

}  // namespace

std::optional<InputBoundsProblem> CheckInputBounds(std::string_view text) {
  if (text.size() > kMaxConfigBytes)
    return InputBoundsProblem{
        Pos{}, absl::StrCat("config file is larger than ", kMaxConfigBytes >> 20, " MiB (",
                            kMaxConfigBytes, " bytes)")};
  return Scanner(text).Run();
}

}  // namespace geogate::config
