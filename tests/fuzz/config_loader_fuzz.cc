// Fuzzes the config loader (LoadString: bounds scan, toml++, every section
// reader, validation) with arbitrary text, and checks what the loader relies
// on to keep toml++ from recursing too deep (config/input_bounds.h): text that
// passes CheckInputBounds and parses builds no tree deeper than
// kMaxNestingDepth. A crash, a sanitizer report or a broken invariant fails.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "config/input_bounds.h"
#include "config/loader.h"
#include "tests/fuzz/fuzz_check.h"

using geogate::fuzz::Check;

namespace {

// Deepest node of the tree, without recursion: the point is not to trust
// the shape of the input.
size_t Depth(const toml::table& root) {
  size_t deepest = 0;
  std::vector<std::pair<const toml::node*, size_t>> todo = {{&root, 0}};
  while (!todo.empty()) {
    auto [node, depth] = todo.back();
    todo.pop_back();
    if (depth > deepest) deepest = depth;
    if (const toml::table* t = node->as_table()) {
      for (const auto& [key, child] : *t)
        todo.emplace_back(&child, depth + 1);
    } else if (const toml::array* a = node->as_array()) {
      for (const toml::node& child : *a)
        todo.emplace_back(&child, depth + 1);
    }
  }
  return deepest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // Every api_key_env is set, so backends get as far as they can; the base
  // directory does not exist, so no file named by the input is opened.
  auto env = [](const std::string&) -> std::optional<std::string> { return "fuzz-key"; };
  geogate::config::LoadResult r =
      geogate::config::LoadString(text, "fuzz.toml", "/nonexistent-geogate-fuzz", env);
  Check(r.ok() == r.errors.empty());
  for (const auto& e : r.errors) {
    Check(!e.message.empty() && e.file == "fuzz.toml");
    // An exception escaped a reader or validation: the loader survives it,
    // but it is a bug.
    Check(e.message.rfind(geogate::config::kInternalLoadError, 0) != 0);
  }

  if (geogate::config::CheckInputBounds(text)) return 0;
  try {
    toml::table root = toml::parse(text, std::string_view("fuzz.toml"));
    Check(Depth(root) <= geogate::config::kMaxNestingDepth);
  } catch (const toml::parse_error&) {
  }
  return 0;
}
