#include "config/toml_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace geogate::config {
namespace {

// Bounds at or beyond this are "practically unbounded": the message names only
// the bound that was crossed instead of an unreadable huge number.
constexpr int64_t kLargeBound = kMaxMillis;

std::string IntRange(int64_t min, int64_t max, int64_t got) {
  if (max < kLargeBound) return absl::StrCat("between ", min, " and ", max);
  if (got > max) return absl::StrCat("at most ", max);
  if (min == 1) return "greater than 0";
  return absl::StrCat("at least ", min);
}

std::string NumberRange(double min, double max, bool min_exclusive) {
  bool unbounded = std::isinf(max);
  if (min_exclusive) {
    return unbounded ? absl::StrCat("greater than ", min)
                     : absl::StrCat("greater than ", min, " and at most ", max);
  }
  return unbounded ? absl::StrCat("at least ", min) : absl::StrCat("between ", min, " and ", max);
}

// Optimal-string-alignment distance over lower-cased text: insertions,
// deletions, substitutions and swaps of neighbours ("kye" -> "key") cost 1,
// and case differences cost nothing ("EU" -> "eu").
size_t EditDistance(std::string_view a_in, std::string_view b_in) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  std::string a = lower(a_in), b = lower(b_in);
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

Pos PosOf(const toml::node& node) {
  const auto& b = node.source().begin;
  return Pos{b.line, b.column};
}

Pos PosOf(const toml::key& key) {
  const auto& b = key.source().begin;
  return Pos{b.line, b.column};
}

const char* TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  // A typo is a few edits; anything further is a different word, and
  // suggesting it would only confuse.
  // (and never suggest by replacing every character: 'q' is not a typo of 'r').
  size_t longest = std::max(word.size(), best.size());
  size_t allowed = std::clamp<size_t>(longest / 3, 1, 3);
  if (best.empty() || best_distance > allowed || best_distance >= longest) return "";
  return best;
}

TableReader::TableReader(const toml::table& table, std::string path, bool array_element,
                         Diagnostics& diag)
    : table_(&table), path_(std::move(path)), diag_(&diag) {
  if (!path_.empty())
    label_ = array_element ? absl::StrCat("[[", path_, "]]") : absl::StrCat("[", path_, "]");
}

std::string TableReader::Describe(std::string_view key) const {
  if (label_.empty()) return absl::StrCat("'", AV(key), "'");
  return absl::StrCat("'", AV(key), "' in ", label_);
}

const toml::node* TableReader::Node(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  return table_->get(key);
}

void TableReader::Missing(std::string_view key) {
  diag_->Error(pos(), label_.empty()
                          ? absl::StrCat("missing required key '", AV(key), "'")
                          : absl::StrCat("missing required key '", AV(key), "' in ", label_));
}

void TableReader::WrongType(const toml::node& node, std::string_view key, const char* expected) {
  diag_->Error(PosOf(node),
               absl::StrCat(Describe(key), " must be ", expected, ", got ", TypeName(node)));
}

std::optional<Located<std::string>> TableReader::String(std::string_view key, Presence p) {
  const toml::node* n = Node(key);
  if (n == nullptr) {
    if (p == Presence::kRequired) Missing(key);
    return std::nullopt;
  }
  if (!n->is_string()) {
    WrongType(*n, key, "a string");
    return std::nullopt;
  }
  return Located<std::string>{n->as_string()->get(), PosOf(*n)};
}

std::optional<Located<bool>> TableReader::Bool(std::string_view key, Presence p) {
  const toml::node* n = Node(key);
  if (n == nullptr) {
    if (p == Presence::kRequired) Missing(key);
    return std::nullopt;
  }
  if (!n->is_boolean()) {
    WrongType(*n, key, "a boolean (true or false)");
    return std::nullopt;
  }
  return Located<bool>{n->as_boolean()->get(), PosOf(*n)};
}

std::optional<Located<int64_t>> TableReader::Integer(std::string_view key, int64_t min, int64_t max,
                                                     Presence p) {
  const toml::node* n = Node(key);
  if (n == nullptr) {
    if (p == Presence::kRequired) Missing(key);
    return std::nullopt;
  }
  if (!n->is_integer()) {
    WrongType(*n, key, "an integer");
    return std::nullopt;
  }
  int64_t v = n->as_integer()->get();
  if (v < min || v > max) {
    diag_->Error(PosOf(*n),
                 absl::StrCat(Describe(key), " must be ", IntRange(min, max, v), ", got ", v));
    return std::nullopt;
  }
  return Located<int64_t>{v, PosOf(*n)};
}

std::optional<Located<double>> TableReader::Number(std::string_view key, double min, double max,
                                                   bool min_exclusive, Presence p) {
  const toml::node* n = Node(key);
  if (n == nullptr) {
    if (p == Presence::kRequired) Missing(key);
    return std::nullopt;
  }
  double v;
  if (n->is_floating_point()) {
    v = n->as_floating_point()->get();
  } else if (n->is_integer()) {
    v = static_cast<double>(n->as_integer()->get());
  } else {
    WrongType(*n, key, "a number");
    return std::nullopt;
  }
  if (!std::isfinite(v)) {
    diag_->Error(PosOf(*n), absl::StrCat(Describe(key), " must be a finite number"));
    return std::nullopt;
  }
  if (v < min || (min_exclusive && v == min) || v > max) {
    diag_->Error(PosOf(*n), absl::StrCat(Describe(key), " must be ",
                                         NumberRange(min, max, min_exclusive), ", got ", v));
    return std::nullopt;
  }
  return Located<double>{v, PosOf(*n)};
}

std::optional<std::vector<Located<std::string>>> TableReader::StringArray(std::string_view key,
                                                                          Presence p) {
  const toml::node* n = Node(key);
  if (n == nullptr) {
    if (p == Presence::kRequired) Missing(key);
    return std::nullopt;
  }
  if (!n->is_array()) {
    WrongType(*n, key, "an array of strings");
    return std::nullopt;
  }
  std::vector<Located<std::string>> out;
  for (const toml::node& element : *n->as_array()) {
    if (!element.is_string()) {
      diag_->Error(PosOf(element), absl::StrCat("elements of ", Describe(key),
                                                " must be strings, got ", TypeName(element)));
      continue;
    }
    out.push_back({element.as_string()->get(), PosOf(element)});
  }
  return out;
}

std::optional<TableReader> TableReader::Table(std::string_view key, Presence p) {
  const toml::node* n = Node(key);
  if (n == nullptr) {
    if (p == Presence::kRequired) Missing(key);
    return std::nullopt;
  }
  if (!n->is_table()) {
    WrongType(*n, key, "a table");
    return std::nullopt;
  }
  std::string path = path_.empty() ? std::string(key) : absl::StrCat(path_, ".", AV(key));
  return TableReader(*n->as_table(), std::move(path), false, *diag_);
}

std::vector<TableReader> TableReader::TableArray(std::string_view key) {
  std::vector<TableReader> out;
  const toml::node* n = Node(key);
  if (n == nullptr) return out;
  std::string path = path_.empty() ? std::string(key) : absl::StrCat(path_, ".", AV(key));
  if (!n->is_array()) {
    WrongType(*n, key, absl::StrCat("an array of tables ([[", path, "]])").c_str());
    return out;
  }
  for (const toml::node& element : *n->as_array()) {
    if (!element.is_table()) {
      diag_->Error(PosOf(element), absl::StrCat("elements of ", Describe(key),
                                                " must be tables, got ", TypeName(element)));
      continue;
    }
    out.emplace_back(*element.as_table(), path, true, *diag_);
  }
  return out;
}

void TableReader::Set(std::string_view key, std::string& out) {
  if (auto v = String(key)) out = std::move(v->value);
}

void TableReader::Set(std::string_view key, bool& out) {
  if (auto v = Bool(key)) out = v->value;
}

void TableReader::SetMillis(std::string_view key, Millis& out, int64_t min) {
  if (auto v = Integer(key, min, kMaxMillis)) out = Millis(v->value);
}

void TableReader::ReportUnknownKeys() {
  for (auto&& [key, node] : *table_) {
    std::string_view name = key.str();
    if (std::find(known_.begin(), known_.end(), name) != known_.end()) continue;
    std::string msg = label_.empty() ? absl::StrCat("unknown key '", AV(name), "' at the top level")
                                     : absl::StrCat("unknown key '", AV(name), "' in ", label_);
    if (std::string hint = ClosestMatch(name, known_); !hint.empty()) {
      absl::StrAppend(&msg, " (did you mean '", hint, "'?)");
    }
    diag_->Error(PosOf(key), std::move(msg));
  }
}

}  // namespace geogate::config
