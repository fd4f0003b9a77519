// LoadFile / LoadString: TOML text -> Draft (sections.h) -> Validate() ->
// immutable Snapshot, with every problem collected on the way.
#include "config/loader.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "config/diagnostics.h"
#include "config/draft.h"
#include "config/input_bounds.h"
#include "config/sections.h"
#include "config/toml_reader.h"
#include "config/validate.h"

namespace geogate::config {
namespace {

namespace fs = std::filesystem;

std::string Sha256Hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) != 1) return "";
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), len));
}

/// Reads all of `path` into `out`, but no more than one byte past
/// kMaxConfigBytes (CheckInputBounds refuses that much); returns "" or what
/// went wrong. Plain POSIX reads: iostreams throw from inside iterators on
/// some errors (EISDIR).
std::string ReadWholeFile(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return std::strerror(EISDIR);
  }
  char buf[16384];
  while (out.size() <= kMaxConfigBytes) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      return std::strerror(saved);
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return "";
}

LoadResult Load(std::string_view text, const std::string& display_name, std::string source_path,
                const fs::path& base_dir, const EnvLookup& env, LoadMode mode) {
  LoadResult result;
  Diagnostics diag(display_name);
  // toml++ recurses per nesting level: deep or huge text never reaches it.
  if (auto problem = CheckInputBounds(text)) {
    diag.Error(problem->pos, std::move(problem->message));
    result.errors = diag.TakeErrors();
    return result;
  }
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(display_name));
  } catch (const toml::parse_error& e) {
    // toml++ stops at the first syntax error; nothing after it can be trusted.
    diag.Error(Pos{e.source().begin.line, e.source().begin.column},
               absl::StrCat("TOML syntax error: ", AV(e.description())));
    result.errors = diag.TakeErrors();
    return result;
  }

  ReadContext ctx{diag, fs::absolute(base_dir).lexically_normal(), env, mode};
  Draft draft;
  try {
    ReadDocument(root, ctx, draft);
    Validate(draft, ctx);
  } catch (const std::exception& e) {
    // A bug, not the operator's mistake -- but a reload must never take the
    // gateway down (DESIGN.md §8): the file is refused and the running
    // config keeps serving. The fuzz target fails on this message.
    diag.Error(Pos{}, absl::StrCat(AV(kInternalLoadError), e.what()));
  }
  result.warnings = diag.TakeWarnings();
  if (diag.has_errors()) {
    result.errors = diag.TakeErrors();
    return result;
  }
  Snapshot& s = draft.snap;
  s.source_path = std::move(source_path);
  s.hash = Sha256Hex(text);
  s.loaded_at = absl::Now();
  s.generation = 0;  // the publisher numbers snapshots
  result.snapshot = std::make_shared<const Snapshot>(std::move(s));
  return result;
}

}  // namespace

void ReadDocument(const toml::table& root, ReadContext& ctx, Draft& d) {
  TableReader top(root, "", false, ctx.diag);
  if (auto version = top.Integer("version", std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max())) {
    if (version->value != 1) {
      ctx.diag.Error(version->pos, absl::StrCat("unsupported config version ", version->value,
                                                " (this geogate reads version 1)"));
    }
  }
  ReadGateway(top, ctx, d);
  ReadGeo(top, ctx, d);
  ReadHealth(top, d);
  ReadRouting(top, d);
  ReadShowback(top, ctx, d);
  ReadCapacity(top, d);
  ReadTracing(top, ctx, d);
  ReadRegions(top, d);
  ReadBackends(top, ctx, d);
  ReadModels(top, d);
  ReadResidency(top, d);
  ReadTenants(top, d);
  top.ReportUnknownKeys();
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

LoadResult LoadFile(const std::string& path, const EnvLookup& env, LoadMode mode) {
  std::string text;
  if (std::string problem = ReadWholeFile(path, text); !problem.empty()) {
    LoadResult result;
    result.errors.push_back(ConfigError{path, 0, 0, "cannot read config file: " + problem});
    return result;
  }
  fs::path absolute = fs::absolute(path).lexically_normal();
  return Load(text, path, absolute.string(), absolute.parent_path(), env, mode);
}

LoadResult LoadString(std::string_view text, const std::string& source_name,
                      const std::string& base_dir, const EnvLookup& env, LoadMode mode) {
  fs::path base = fs::absolute(base_dir.empty() ? fs::path(".") : fs::path(base_dir));
  fs::path source = fs::path(source_name);
  if (source.is_relative()) source = base / source;
  return Load(text, source_name, source.lexically_normal().string(), base, env, mode);
}

}  // namespace geogate::config
