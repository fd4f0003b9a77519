#include "config/value_checks.h"

#include <unistd.h>

#include <system_error>

#include "absl/strings/str_cat.h"

namespace geogate::config {
namespace {

namespace fs = std::filesystem;

std::string Resolve(const std::string& written, const fs::path& base_dir) {
  fs::path p(written);
  if (p.is_relative()) p = base_dir / p;
  return p.lexically_normal().string();
}

}  // namespace

bool CheckIdentifier(const TableReader& table, std::string_view key,
                     const Located<std::string>& value) {
  bool ok = !value.value.empty();
  for (char c : value.value) {
    bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '_' || c == '-';
    if (!allowed) ok = false;
  }
  if (!ok) {
    table.diag().Error(value.pos, absl::StrCat(table.Describe(key),
                                               " must be a non-empty name of letters, "
                                               "digits, '.', '_' and '-', got '",
                                               value.value, "'"));
  }
  return ok;
}

bool CheckModelName(const TableReader& table, std::string_view key,
                    const Located<std::string>& value) {
  bool ok = !value.value.empty();
  for (char c : value.value) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) ok = false;
  }
  if (!ok) {
    table.diag().Error(value.pos,
                       absl::StrCat(table.Describe(key),
                                    " must be a non-empty model name without spaces or control "
                                    "characters, got '",
                                    value.value, "'"));
  }
  return ok;
}

std::optional<GeoPoint> ReadGeoPoint(TableReader& table, std::string_view key, Presence presence) {
  auto point = table.Table(key, presence);
  if (!point) return std::nullopt;
  auto lat = point->Number("lat", -90, 90, false, Presence::kRequired);
  auto lon = point->Number("lon", -180, 180, false, Presence::kRequired);
  point->ReportUnknownKeys();
  if (!lat || !lon) return std::nullopt;
  return GeoPoint{lat->value, lon->value};
}

std::optional<std::string> ResolveReadableFile(const Located<std::string>& value,
                                               std::string_view what, ReadContext& ctx) {
  if (value.value.empty()) {
    ctx.diag.Error(value.pos, absl::StrCat(AV(what), " path is empty"));
    return std::nullopt;
  }
  std::string path = Resolve(value.value, ctx.base_dir);
  if (ctx.mode == LoadMode::kSyntaxOnly) return path;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    ctx.diag.Error(value.pos, absl::StrCat(AV(what), " '", path, "' does not exist"));
    return std::nullopt;
  }
  if (!fs::is_regular_file(st)) {
    ctx.diag.Error(value.pos, absl::StrCat(AV(what), " '", path, "' is not a regular file"));
    return std::nullopt;
  }
  if (::access(path.c_str(), R_OK) != 0) {
    ctx.diag.Error(value.pos, absl::StrCat(AV(what), " '", path, "' is not readable"));
    return std::nullopt;
  }
  return path;
}

std::optional<std::string> ResolveOutputFile(const Located<std::string>& value,
                                             std::string_view what, ReadContext& ctx) {
  if (value.value == "-" || value.value.empty()) return value.value;
  std::string path = Resolve(value.value, ctx.base_dir);
  if (ctx.mode == LoadMode::kSyntaxOnly) return path;
  fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    ctx.diag.Error(value.pos,
                   absl::StrCat("directory '", dir.string(), "' of ", AV(what), " does not exist"));
    return std::nullopt;
  }
  if (fs::is_directory(path, ec)) {
    ctx.diag.Error(value.pos, absl::StrCat(AV(what), " '", path, "' is a directory"));
    return std::nullopt;
  }
  return path;
}

}  // namespace geogate::config
