#include "config/validate.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/toml_reader.h"

namespace geogate::config {
namespace {

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string hint = ClosestMatch(word, candidates);
  return hint.empty() ? "" : absl::StrCat(" (did you mean '", hint, "'?)");
}

/// Indexes items by name; a repeated name is an error at the repeat.
template <class Item, class Refs>
void IndexByName(const char* kind, const std::vector<Item>& items, const std::vector<Refs>& refs,
                 absl::flat_hash_map<std::string, size_t>& index, Diagnostics& diag) {
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& name = items[i].name;
    if (name.empty()) continue;  // missing or malformed: already reported
    auto [it, inserted] = index.try_emplace(name, i);
    if (!inserted) {
      diag.Error(refs[i].name,
                 absl::StrCat("duplicate ", kind, " name '", name, "' (first defined at line ",
                              refs[it->second].name.line, ")"));
    }
  }
}

std::vector<std::string> Keys(const absl::flat_hash_map<std::string, size_t>& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m)
    out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

void ResolveRegions(Draft& d, Diagnostics& diag) {
  Snapshot& s = d.snap;
  IndexByName("region", s.regions, d.regions, s.region_by_name, diag);
  for (size_t i = 0; i < s.regions.size(); ++i) {
    const std::string& j = s.regions[i].jurisdiction;
    if (j.empty()) continue;
    auto [it, inserted] = s.regions_by_jurisdiction.try_emplace(j, RegionSet(s.regions.size()));
    it->second.insert(i);
  }
}

void ResolveBackends(Draft& d, Diagnostics& diag) {
  Snapshot& s = d.snap;
  IndexByName("backend", s.backends, d.backends, s.backend_by_name, diag);
  std::vector<std::string> regions = Keys(s.region_by_name);
  for (size_t i = 0; i < s.backends.size(); ++i) {
    Backend& b = s.backends[i];
    if (b.region.empty()) continue;
    auto it = s.region_by_name.find(b.region);
    if (it == s.region_by_name.end()) {
      diag.Error(d.backends[i].region,
                 absl::StrCat("backend '", b.name, "': region '", b.region,
                              "' is not declared in [[regions]]", DidYouMean(b.region, regions)));
      continue;
    }
    b.region_index = it->second;
  }
}

// The canonical model list is every [[models]] name plus every name a backend
// lists that is neither such a name nor an alias of one; backends may list a
// model by alias and are rewritten to the canonical name.
void ResolveModels(Draft& d, Diagnostics& diag) {
  Snapshot& s = d.snap;
  struct Entry {
    size_t model;
    Pos pos;
    bool alias;
  };
  absl::flat_hash_map<std::string, Entry> names;
  const size_t declared = s.models.size();
  for (size_t i = 0; i < declared; ++i) {
    const std::string& name = s.models[i].name;
    if (name.empty()) continue;
    auto [it, inserted] = names.try_emplace(name, Entry{i, d.models[i].name, false});
    if (!inserted) {
      diag.Error(d.models[i].name,
                 absl::StrCat("duplicate model name '", name, "' (first defined at line ",
                              it->second.pos.line, ")"));
    }
  }
  for (size_t i = 0; i < declared; ++i) {
    const Model& m = s.models[i];
    for (size_t k = 0; k < m.aliases.size(); ++k) {
      const std::string& alias = m.aliases[k];
      Pos at = d.models[i].aliases[k];
      if (alias == m.name) {
        diag.Error(at, absl::StrCat("alias '", alias, "' of model '", m.name,
                                    "' is the model's own name"));
        continue;
      }
      auto [it, inserted] = names.try_emplace(alias, Entry{i, at, true});
      if (!inserted) {
        const Entry& other = it->second;
        diag.Error(at, absl::StrCat("alias '", alias, "' of model '", m.name, "' collides with ",
                                    other.alias ? "an alias of " : "", "model '",
                                    s.models[other.model].name, "' (line ", other.pos.line, ")"));
      }
    }
  }

  for (size_t b = 0; b < s.backends.size(); ++b) {
    Backend& backend = s.backends[b];
    std::vector<std::string> canonical;
    std::vector<size_t> seen;
    for (size_t k = 0; k < backend.models.size(); ++k) {
      const std::string& written = backend.models[k];
      Pos at = d.backends[b].models[k];
      size_t index;
      if (auto it = names.find(written); it != names.end()) {
        index = it->second.model;
        // An alias of a [[models]] entry without a name (already an error):
        // there is no canonical name to rewrite to.
        if (s.models[index].name.empty()) continue;
      } else {
        index = s.models.size();
        Model implied;
        implied.name = written;
        s.models.push_back(std::move(implied));
        names.try_emplace(written, Entry{index, at, false});
      }
      if (std::find(seen.begin(), seen.end(), index) != seen.end()) {
        const std::string& name = s.models[index].name;
        diag.Error(
            at, written == name
                    ? absl::StrCat("backend '", backend.name, "' lists model '", name, "' twice")
                    : absl::StrCat("backend '", backend.name, "' lists model '", name, "' twice ('",
                                   written, "' is an alias of it)"));
        continue;
      }
      seen.push_back(index);
      canonical.push_back(s.models[index].name);
    }
    backend.models = std::move(canonical);
  }

  for (const auto& [name, entry] : names)
    s.model_by_name.emplace(name, entry.model);
  s.backends_by_model.assign(s.models.size(), {});
  for (size_t b = 0; b < s.backends.size(); ++b) {
    for (const std::string& m : s.backends[b].models) {
      s.backends_by_model[s.model_by_name.at(m)].push_back(b);
    }
  }
  for (size_t i = 0; i < declared; ++i) {
    if (!s.models[i].name.empty() && s.backends_by_model[i].empty()) {
      diag.Warning(absl::StrCat("model '", s.models[i].name, "' ([[models]] at line ",
                                d.models[i].table.line, ") is served by no backend"));
    }
  }
  for (const Backend& b : s.backends) {
    if (!b.vram_gb) continue;
    for (const std::string& m : b.models) {
      const Model& model = s.models[s.model_by_name.at(m)];
      if (model.min_vram_gb && *b.vram_gb < *model.min_vram_gb) {
        diag.Warning(absl::StrCat("backend '", b.name, "' has vram_gb ", *b.vram_gb,
                                  " but serves model '", m, "' with min_vram_gb ",
                                  *model.min_vram_gb));
      }
    }
  }
}

void ResolveRules(Draft& d, Diagnostics& diag) {
  Snapshot& s = d.snap;
  for (size_t i = 0; i < s.residency.size(); ++i) {
    if (s.residency[i].name == "deny") {
      diag.Error(d.rules[i].name,
                 "a [[residency]] rule cannot be named 'deny': geo.unknown uses it for \"deny\"");
    }
  }
  IndexByName("residency rule", s.residency, d.rules, s.rule_by_name, diag);
  std::vector<std::string> regions = Keys(s.region_by_name);
  std::vector<std::string> jurisdictions;
  for (const auto& [j, set] : s.regions_by_jurisdiction)
    jurisdictions.push_back(j);
  std::sort(jurisdictions.begin(), jurisdictions.end());

  absl::flat_hash_map<std::string, std::string> first_rule_for_place;
  for (size_t i = 0; i < s.residency.size(); ++i) {
    ResidencyRule& r = s.residency[i];
    const Draft::RuleRefs& refs = d.rules[i];
    r.allowed = RegionSet(s.regions.size());
    bool unresolved = false;
    for (size_t k = 0; k < r.allow_regions.size(); ++k) {
      const std::string& name = r.allow_regions[k];
      auto it = s.region_by_name.find(name);
      if (it == s.region_by_name.end()) {
        diag.Error(refs.allow_regions[k],
                   absl::StrCat("residency rule '", r.name, "': region '", name,
                                "' is not declared in [[regions]]", DidYouMean(name, regions)));
        unresolved = true;
        continue;
      }
      r.allowed.insert(it->second);
    }
    for (size_t k = 0; k < r.allow_jurisdictions.size(); ++k) {
      const std::string& name = r.allow_jurisdictions[k];
      auto it = s.regions_by_jurisdiction.find(name);
      if (it == s.regions_by_jurisdiction.end()) {
        diag.Error(refs.allow_jurisdictions[k],
                   absl::StrCat("residency rule '", r.name, "': no region has jurisdiction '", name,
                                "'", DidYouMean(name, jurisdictions)));
        unresolved = true;
        continue;
      }
      r.allowed.unite(it->second);
    }
    if (r.allowed.empty() && !unresolved) {
      diag.Error(refs.table, absl::StrCat("residency rule '", r.name,
                                          "' allows no region: give allow_regions and/or "
                                          "allow_jurisdictions"));
    }
    // First matching rule wins, so a place already claimed by an earlier rule
    // never reaches this one: almost certainly not what the operator meant.
    auto note_shadowed = [&](const std::string& place, const char* what) {
      auto [it, inserted] = first_rule_for_place.try_emplace(place, r.name);
      if (!inserted && it->second != r.name) {
        diag.Warning(absl::StrCat(what, " ", place, " in residency rule '", r.name,
                                  "' never matches: rule '", it->second, "' comes first"));
      }
    };
    for (const std::string& c : r.countries)
      note_shadowed(c, "country");
    for (const std::string& c : r.continents)
      note_shadowed("continent:" + c, "continent");
  }
}

void ResolveUnknown(Draft& d, Diagnostics& diag) {
  Geo& g = d.snap.geo;
  if (g.unknown == "deny") {
    g.unknown_rule.reset();
    return;
  }
  auto it = d.snap.rule_by_name.find(g.unknown);
  if (it == d.snap.rule_by_name.end()) {
    diag.Error(d.geo_unknown,
               absl::StrCat("'unknown' in [geo] must be \"deny\" or the name of a "
                            "[[residency]] rule, got \"",
                            g.unknown, "\"", DidYouMean(g.unknown, Keys(d.snap.rule_by_name))));
    return;
  }
  g.unknown_rule = it->second;
}

void ResolveTenants(Draft& d, Diagnostics& diag) {
  Snapshot& s = d.snap;
  absl::flat_hash_map<std::string, size_t> tenant_by_name;
  IndexByName("tenant", s.tenants, d.tenants, tenant_by_name, diag);
  std::vector<std::string> rules = Keys(s.rule_by_name);
  absl::flat_hash_map<std::string, Pos> key_pos;
  for (size_t i = 0; i < s.tenants.size(); ++i) {
    Tenant& t = s.tenants[i];
    const Draft::TenantRefs& refs = d.tenants[i];
    if (!t.residency.empty()) {
      auto it = s.rule_by_name.find(t.residency);
      if (it == s.rule_by_name.end()) {
        diag.Error(refs.residency, absl::StrCat("tenant '", t.name, "': residency rule '",
                                                t.residency, "' is not declared in [[residency]]",
                                                DidYouMean(t.residency, rules)));
      } else {
        t.residency_rule = it->second;
      }
    }
    for (size_t k = 0; k < t.api_key_sha256.size(); ++k) {
      std::string key(reinterpret_cast<const char*>(t.api_key_sha256[k].data()), 32);
      auto [it, inserted] = s.tenant_by_key_hash.try_emplace(key, i);
      if (!inserted) {
        const Tenant& other = s.tenants[it->second];
        diag.Error(
            refs.keys[k],
            it->second == i
                ? absl::StrCat("tenant '", t.name, "' lists the same key hash twice")
                : absl::StrCat("key hash of tenant '", t.name, "' is already used by tenant '",
                               other.name, "' (line ", key_pos[key].line, ")"));
        continue;
      }
      key_pos[key] = refs.keys[k];
    }
  }
}

void Advise(const Draft& d, Diagnostics& diag) {
  const Snapshot& s = d.snap;
  if (s.backends.empty()) {
    diag.Warning("no [[backends]]: every model request will fail with 404");
  }
  for (size_t r = 0; r < s.regions.size(); ++r) {
    bool used = std::any_of(s.backends.begin(), s.backends.end(),
                            [&](const Backend& b) { return b.region == s.regions[r].name; });
    if (!used && !s.backends.empty()) {
      diag.Warning(absl::StrCat("region '", s.regions[r].name, "' has no backends"));
    }
  }
  if (!d.gateway_location_set && s.regions.size() > 1) {
    diag.Warning(
        "gateway.location is not set: until latency samples arrive, the distance prior "
        "treats this edge as if it were at 0,0");
  }
  if (s.geo.client_ip == ClientIpSource::kXForwardedFor && s.geo.trusted_proxies.empty()) {
    diag.Warning(
        "geo.client_ip is \"x-forwarded-for\" but geo.trusted_proxies is empty: "
        "X-Forwarded-For is never trusted and clients are located by peer address");
  }
  if (s.geo.client_ip == ClientIpSource::kProxyProtocol) {
    for (const Listener& l : s.gateway.listeners) {
      if (!l.proxy_protocol) {
        diag.Warning(absl::StrCat("geo.client_ip is \"proxy-protocol\" but listener '", l.address,
                                  "' has no proxy_protocol: its clients are located by peer "
                                  "address"));
      }
    }
  }
  bool geographic = std::any_of(s.residency.begin(), s.residency.end(), [](const auto& r) {
    return !r.countries.empty() || !r.continents.empty();
  });
  if (geographic && s.geo.database.empty()) {
    diag.Warning(
        "residency rules match countries/continents but geo.database is not set: every "
        "client is unknown and gets geo.unknown");
  }
}

}  // namespace

void Validate(Draft& d, ReadContext& ctx) {
  ResolveRegions(d, ctx.diag);
  ResolveBackends(d, ctx.diag);
  ResolveModels(d, ctx.diag);
  ResolveRules(d, ctx.diag);
  ResolveUnknown(d, ctx.diag);
  ResolveTenants(d, ctx.diag);
  Advise(d, ctx.diag);
}

}  // namespace geogate::config
