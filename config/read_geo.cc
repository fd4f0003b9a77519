// [geo]: where the client is, and whom to believe about it.
#include "absl/strings/str_cat.h"
#include "config/address.h"
#include "config/sections.h"
#include "config/value_checks.h"

namespace geogate::config {
namespace {

// mmdb lookups take a path of map keys / array indices: "country.iso_code",
// "subdivisions.0.iso_code". Empty segments would never match anything.
void ReadFieldPath(TableReader& t, std::string_view key, std::string& out) {
  auto v = t.String(key);
  if (!v) return;
  bool ok = !v->value.empty() && v->value.front() != '.' && v->value.back() != '.' &&
            v->value.find("..") == std::string::npos &&
            v->value.find_first_of(" \t") == std::string::npos;
  if (!ok) {
    t.diag().Error(v->pos, absl::StrCat(t.Describe(key),
                                        " must be a dotted field path like 'country.iso_code', "
                                        "got '",
                                        v->value, "'"));
    return;
  }
  out = v->value;
}

}  // namespace

void ReadGeo(TableReader& root, ReadContext& ctx, Draft& d) {
  auto t = root.Table("geo");
  if (!t) return;
  Geo& g = d.snap.geo;
  if (auto db = t->String("database")) {
    // "" is the documented way to say "no database": every client is unknown.
    if (!db->value.empty()) {
      if (auto path = ResolveReadableFile(*db, "geo database", ctx)) {
        g.database = *path;
        g.database_at = db->pos;
      }
    }
  }
  if (auto source = t->String("client_ip")) {
    if (source->value == "peer") {
      g.client_ip = ClientIpSource::kPeer;
    } else if (source->value == "x-forwarded-for") {
      g.client_ip = ClientIpSource::kXForwardedFor;
    } else if (source->value == "proxy-protocol") {
      g.client_ip = ClientIpSource::kProxyProtocol;
    } else {
      ctx.diag.Error(source->pos, absl::StrCat(t->Describe("client_ip"),
                                               " must be one of \"peer\", \"x-forwarded-for\", "
                                               "\"proxy-protocol\", got \"",
                                               source->value, "\""));
    }
  }
  if (auto proxies = t->StringArray("trusted_proxies")) {
    for (const auto& p : *proxies) {
      auto cidr = ParseCidr(p.value);
      if (!cidr.ok()) {
        ctx.diag.Error(p.pos, absl::StrCat("entry of ", t->Describe("trusted_proxies"), ": ",
                                           std::string(cidr.status().message())));
        continue;
      }
      g.trusted_proxies.push_back(*cidr);
    }
  }
  if (auto unknown = t->String("unknown")) {
    // Resolved against the [[residency]] rules by Validate().
    g.unknown = unknown->value;
    d.geo_unknown = unknown->pos;
  }
  ReadFieldPath(*t, "country_field", g.country_field);
  ReadFieldPath(*t, "continent_field", g.continent_field);
  ReadFieldPath(*t, "subdivision_field", g.subdivision_field);
  ReadFieldPath(*t, "latitude_field", g.latitude_field);
  ReadFieldPath(*t, "longitude_field", g.longitude_field);
  t->ReportUnknownKeys();
}

}  // namespace geogate::config
