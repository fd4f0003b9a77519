// [[regions]], [[backends]] and [[models]]: what the gateway can route to.
#include <limits>

#include "absl/strings/str_cat.h"
#include "config/address.h"
#include "config/sections.h"
#include "config/value_checks.h"

namespace geogate::config {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsEnvName(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

/// Reads `name` (required, checked with `check`) and records its position.
template <class Check>
Draft::Named ReadName(TableReader& t, std::string& out, Check check) {
  Draft::Named n{t.pos(), t.pos()};
  if (auto name = t.String("name", Presence::kRequired)) {
    n.name = name->pos;
    if (check(t, "name", *name)) out = name->value;
  }
  return n;
}

void ReadApiKey(TableReader& t, ReadContext& ctx, Backend& b) {
  auto var = t.String("api_key_env");
  if (!var) return;
  if (!IsEnvName(var->value)) {
    ctx.diag.Error(var->pos,
                   absl::StrCat(t.Describe("api_key_env"),
                                " must be an environment variable name, got '", var->value, "'"));
    return;
  }
  b.api_key_env = var->value;
  if (ctx.mode == LoadMode::kSyntaxOnly) return;  // linting without the secrets
  // DESIGN.md §7: a named but unset variable is an error, not "no key" -- a
  // gateway that silently stopped authenticating upstream would fail every
  // request. The value is a secret and never appears in a message.
  std::optional<std::string> value = ctx.env(var->value);
  if (!value) {
    ctx.diag.Error(var->pos, absl::StrCat("environment variable '", var->value,
                                          "' (api_key_env of backend '", b.name, "') is not set"));
  } else if (value->empty()) {
    ctx.diag.Error(var->pos, absl::StrCat("environment variable '", var->value,
                                          "' (api_key_env of backend '", b.name, "') is empty"));
  } else {
    b.api_key = std::move(*value);
  }
}

void ReadBackend(TableReader& t, ReadContext& ctx, Draft& d) {
  Backend b;
  Draft::BackendRefs refs;
  static_cast<Draft::Named&>(refs) = ReadName(t, b.name, CheckIdentifier);
  refs.region = t.pos();
  if (auto region = t.String("region", Presence::kRequired)) {
    refs.region = region->pos;
    b.region = region->value;  // resolved by Validate()
  }
  if (auto url = t.String("url", Presence::kRequired)) {
    auto parsed = ParseBackendUrl(url->value);
    if (parsed.ok()) {
      b.url = url->value;
      b.tls_at = url->pos;
      b.tls = parsed->tls;
      b.host = parsed->host;
      b.port = parsed->port;
      b.base_path = parsed->root;
    } else {
      ctx.diag.Error(url->pos,
                     absl::StrCat(t.Describe("url"), ": ", std::string(parsed.status().message())));
    }
  }
  if (auto models = t.StringArray("models", Presence::kRequired)) {
    if (models->empty()) {
      ctx.diag.Error(PosOf(*t.Node("models")),
                     absl::StrCat(t.Describe("models"), " must list at least one model"));
    }
    for (auto& m : *models) {
      if (!CheckModelName(t, "models", m)) continue;
      b.models.push_back(std::move(m.value));  // canonicalised by Validate()
      refs.models.push_back(m.pos);
    }
  }
  t.Set("gpu", b.gpu);
  t.Set("provider", b.provider);
  if (auto tier = t.String("tier")) {
    if (tier->value == "reserved") {
      b.tier = Tier::kReserved;
    } else if (tier->value == "on-demand") {
      b.tier = Tier::kOnDemand;
    } else if (tier->value == "spot") {
      b.tier = Tier::kSpot;
    } else {
      ctx.diag.Error(tier->pos, absl::StrCat(t.Describe("tier"),
                                             " must be one of \"reserved\", \"on-demand\", "
                                             "\"spot\", got \"",
                                             tier->value, "\""));
    }
  }
  t.SetInt("capacity", b.capacity, 1);
  if (auto cost = t.Number("cost_per_hour", 0, kInf)) b.cost_per_hour = cost->value;
  if (auto weight = t.Number("weight", 0, kInf, /*min_exclusive=*/true)) b.weight = weight->value;
  if (auto vram = t.Number("vram_gb", 0, kInf, /*min_exclusive=*/true)) b.vram_gb = vram->value;
  ReadApiKey(t, ctx, b);
  auto ca_file = t.String("ca_file");
  if (ca_file) {
    if (auto path = ResolveReadableFile(*ca_file, "CA file", ctx)) {
      b.ca_file = *path;
      b.tls_at = ca_file->pos;
    }
  }
  auto verify = t.Bool("tls_verify");
  if (verify) b.tls_verify = verify->value;
  t.ReportUnknownKeys();

  if (!b.url.empty() && !b.tls && (ca_file || verify)) {
    ctx.diag.Warning(absl::StrCat("backend '", b.name, "' (line ", refs.table.line,
                                  ") uses http://; ca_file and tls_verify have no effect"));
  } else if (b.tls && !b.tls_verify) {
    ctx.diag.Warning(absl::StrCat("backend '", b.name, "' (line ", refs.table.line,
                                  ") has tls_verify = false: its certificate is not checked"));
  }
  d.snap.backends.push_back(std::move(b));
  d.backends.push_back(std::move(refs));
}

void ReadModel(TableReader& t, Draft& d) {
  Model m;
  Draft::ModelRefs refs;
  static_cast<Draft::Named&>(refs) = ReadName(t, m.name, CheckModelName);
  if (auto aliases = t.StringArray("aliases")) {
    for (auto& a : *aliases) {
      if (!CheckModelName(t, "aliases", a)) continue;
      m.aliases.push_back(std::move(a.value));
      refs.aliases.push_back(a.pos);
    }
  }
  if (auto prefs = t.StringArray("gpu_preference")) {
    for (auto& p : *prefs) {
      if (p.value.empty()) {
        t.diag().Error(
            p.pos, absl::StrCat("entries of ", t.Describe("gpu_preference"), " must not be empty"));
        continue;
      }
      m.gpu_preference.push_back(std::move(p.value));
    }
  }
  if (auto vram = t.Number("min_vram_gb", 0, kInf, /*min_exclusive=*/true)) {
    m.min_vram_gb = vram->value;
  }
  t.ReportUnknownKeys();
  d.snap.models.push_back(std::move(m));
  d.models.push_back(std::move(refs));
}

}  // namespace

void ReadRegions(TableReader& root, Draft& d) {
  for (TableReader& t : root.TableArray("regions")) {
    Region r;
    Draft::Named refs = ReadName(t, r.name, CheckIdentifier);
    if (auto j = t.String("jurisdiction", Presence::kRequired)) {
      if (CheckIdentifier(t, "jurisdiction", *j)) r.jurisdiction = j->value;
    }
    if (auto location = ReadGeoPoint(t, "location", Presence::kRequired)) r.location = *location;
    t.ReportUnknownKeys();
    d.snap.regions.push_back(std::move(r));
    d.regions.push_back(refs);
  }
}

void ReadBackends(TableReader& root, ReadContext& ctx, Draft& d) {
  for (TableReader& t : root.TableArray("backends"))
    ReadBackend(t, ctx, d);
}

void ReadModels(TableReader& root, Draft& d) {
  for (TableReader& t : root.TableArray("models"))
    ReadModel(t, d);
}

}  // namespace geogate::config
