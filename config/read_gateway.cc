// [gateway], its listeners, admin endpoint, limits and upstream behaviour.
#include <algorithm>
#include <charconv>
#include <limits>

#include <boost/url/parse.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/address.h"
#include "config/sections.h"
#include "config/value_checks.h"

namespace geogate::config {
namespace {

// What browsers send on a preflight for the OpenAI SDKs (openai-node sends
// its x-stainless-* platform and retry headers from a browser too, and
// User-Agent, which Firefox lets a page set), the Vercel AI SDK and
// LangChain, plus the gateway's own request headers. Lower case: the
// header names a browser lists in Access-Control-Request-Headers are.
constexpr const char* kDefaultCorsAllowedHeaders =
    "authorization, content-type, user-agent, x-request-id, x-geogate-residency, "
    "openai-organization, openai-project, openai-beta, "
    "x-stainless-lang, x-stainless-package-version, x-stainless-os, x-stainless-arch, "
    "x-stainless-runtime, x-stainless-runtime-version, x-stainless-retry-count, "
    "x-stainless-timeout, x-stainless-helper-method, x-stainless-poll-helper, "
    "x-stainless-custom-poll-interval";

// A config value quoted for a message: escaped, so a hostile file cannot put
// control characters into the log, and cut to a readable length.
std::string Quoted(std::string_view v) {
  constexpr size_t kMax = 80;
  std::string out = absl::StrCat("'", absl::CHexEscape(std::string(v.substr(0, kMax))));
  if (v.size() > kMax) out += "...";
  return out + "'";
}

// An origin as browsers serialise it (RFC 6454 6.1): scheme://host[:port],
// lower case, without the scheme's default port, and nothing after it. The
// Origin header is compared with the configured text byte for byte, so any
// other spelling could never match: it is refused with the spelling to use.
// @return the error, empty when `text` is such an origin.
std::string OriginError(std::string_view text) {
  if (text == "null") {
    return "'null' is the origin of sandboxed frames and file: pages; allowing it would let "
           "any of them in";
  }
  auto parsed = boost::urls::parse_absolute_uri(text);
  if (!parsed) return "is not an origin: write scheme://host[:port], e.g. https://app.example.com";
  boost::urls::url_view u = *parsed;
  std::string scheme = absl::AsciiStrToLower(std::string(u.scheme()));
  if (scheme != "http" && scheme != "https") {
    return "is not an http or https origin: browsers send those from web pages";
  }
  if (!u.has_authority() || u.encoded_host().empty()) return "names no host";
  if (u.has_userinfo()) return "has a user name: an origin is scheme://host[:port]";
  if (u.encoded_host().find('%') != std::string_view::npos) {
    return "has a percent-encoded host: write it as the browser sends it";
  }
  std::string canonical =
      absl::StrCat(scheme, "://", absl::AsciiStrToLower(std::string(u.encoded_host())));
  if (u.has_port() && !u.port().empty()) {
    // Not port_number(): Boost 1.81's wraps a port above 65535.
    std::string_view digits = u.port();
    uint32_t port = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535)
      return "has no valid port (1-65535)";
    if (port != (scheme == "https" ? 443 : 80)) absl::StrAppend(&canonical, ":", port);
  }
  if (!u.encoded_path().empty() || u.has_query() || u.has_fragment()) {
    return absl::StrCat("has a path, query or fragment; browsers send the origin alone: '",
                        canonical, "'");
  }
  if (canonical != text) {
    return absl::StrCat("is not spelled as browsers send it: write '", canonical, "'");
  }
  return {};
}

// An HTTP field name (RFC 9110 5.1: a token), or "*".
bool IsFieldName(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool tchar = absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                 std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!tchar) return false;
  }
  return true;
}

// cors_allowed_origins, cors_allowed_headers, cors_max_age_s of a listener.
void ReadCors(TableReader& t, ReadContext& ctx, Cors& cors) {
  if (auto origins = t.StringArray("cors_allowed_origins")) {
    for (const auto& o : *origins) {
      const std::string where =
          absl::StrCat("origin ", Quoted(o.value), " in ", t.Describe("cors_allowed_origins"));
      if (o.value == "*") {
        if (origins->size() > 1) {
          ctx.diag.Error(o.pos, absl::StrCat(where, ": '*' allows every origin, list it alone"));
        }
        cors.any_origin = true;
        continue;
      }
      if (std::string error = OriginError(o.value); !error.empty()) {
        ctx.diag.Error(o.pos, absl::StrCat(where, " ", error));
        continue;
      }
      if (std::find(cors.allowed_origins.begin(), cors.allowed_origins.end(), o.value) !=
          cors.allowed_origins.end()) {
        ctx.diag.Error(o.pos, absl::StrCat(where, " is listed twice"));
        continue;
      }
      cors.allowed_origins.push_back(o.value);
    }
    // An error leaves CORS off rather than half configured.
    if (cors.any_origin && origins->size() > 1) {
      cors.any_origin = false;
      cors.allowed_origins.clear();
    }
  }
  cors.allowed_headers = kDefaultCorsAllowedHeaders;
  if (auto headers = t.StringArray("cors_allowed_headers")) {
    std::vector<std::string> names;
    for (const auto& h : *headers) {
      if (!IsFieldName(h.value)) {
        ctx.diag.Error(h.pos,
                       absl::StrCat("entry ", Quoted(h.value), " of ",
                                    t.Describe("cors_allowed_headers"), " is not a header name"));
        continue;
      }
      names.push_back(absl::AsciiStrToLower(h.value));
    }
    cors.allowed_headers = absl::StrJoin(names, ", ");
  }
  // Browsers cap it themselves (Chromium at 7200 s, Firefox at 86400 s).
  t.SetInt("cors_max_age_s", cors.max_age_s, 0, 86400);
}

void ReadListener(TableReader& t, ReadContext& ctx, Draft& d) {
  Listener l;
  Pos address_pos = t.pos();
  if (auto address = t.String("address", Presence::kRequired)) {
    l.address = address->value;
    address_pos = address->pos;
    auto hp = ParseHostPort(address->value, /*allow_port_zero=*/true);
    if (hp.ok()) {
      l.host = hp->host;
      l.port = hp->port;
    } else {
      ctx.diag.Error(address->pos,
                     absl::StrCat(t.Describe("address"), ": ", std::string(hp.status().message())));
    }
  }
  if (auto tls = t.Table("tls")) {
    auto cert = tls->String("cert", Presence::kRequired);
    auto key = tls->String("key", Presence::kRequired);
    auto tickets = tls->String("ticket_keys");
    tls->ReportUnknownKeys();
    std::optional<std::string> cert_path, key_path, tickets_path;
    if (cert) cert_path = ResolveReadableFile(*cert, "TLS certificate file", ctx);
    if (key) key_path = ResolveReadableFile(*key, "TLS key file", ctx);
    if (tickets) tickets_path = ResolveReadableFile(*tickets, "TLS ticket key file", ctx);
    if (cert_path && key_path && (!tickets || tickets_path)) {
      TlsFiles files{*cert_path, *key_path, tickets_path.value_or(""), cert->pos, key->pos, {}};
      if (tickets) files.ticket_keys_at = tickets->pos;
      l.tls = std::move(files);
    }
  }
  t.Set("proxy_protocol", l.proxy_protocol);
  ReadCors(t, ctx, l.cors);
  t.ReportUnknownKeys();

  // Two listeners on one address would fail at bind time, long after --check
  // said the file was fine. Port 0 picks a fresh port each time, so it can repeat.
  if (!l.host.empty() && l.port != 0) {
    for (size_t i = 0; i < d.snap.gateway.listeners.size(); ++i) {
      const Listener& other = d.snap.gateway.listeners[i];
      if (other.host == l.host && other.port == l.port) {
        ctx.diag.Error(address_pos,
                       absl::StrCat("listener address '", l.address,
                                    "' repeats the listener at line ", d.listener_address[i].line));
        break;
      }
    }
  }
  d.snap.gateway.listeners.push_back(std::move(l));
  d.listener_address.push_back(address_pos);
}

void ReadAdmin(TableReader& gw, ReadContext& ctx, Draft& d) {
  auto admin = gw.Table("admin");
  if (!admin) return;
  Admin& a = d.snap.gateway.admin;
  if (auto address = admin->String("address")) {
    auto hp = ParseHostPort(address->value, /*allow_port_zero=*/true);
    if (!hp.ok()) {
      ctx.diag.Error(address->pos, absl::StrCat(admin->Describe("address"), ": ",
                                                std::string(hp.status().message())));
    } else {
      a.address = address->value;
      a.host = hp->host;
      a.port = hp->port;
      for (size_t i = 0; i < d.snap.gateway.listeners.size(); ++i) {
        const Listener& l = d.snap.gateway.listeners[i];
        if (a.port != 0 && l.host == a.host && l.port == a.port) {
          ctx.diag.Error(address->pos, absl::StrCat("admin address '", a.address,
                                                    "' is also the listener at line ",
                                                    d.listener_address[i].line));
          break;
        }
      }
    }
  }
  admin->ReportUnknownKeys();
}

void ReadLimits(TableReader& gw, Draft& d) {
  auto t = gw.Table("limits");
  if (!t) return;
  Limits& l = d.snap.gateway.limits;
  t->SetInt("max_header_bytes", l.max_header_bytes, 1);
  t->SetInt("max_body_bytes", l.max_body_bytes, 1);
  t->SetMillis("header_timeout_ms", l.header_timeout, 1);
  t->SetMillis("idle_timeout_ms", l.idle_timeout, 1);
  t->SetMillis("park_after_ms", l.park_after, 0);
  t->SetMillis("body_timeout_ms", l.body_timeout, 1);
  t->SetInt("max_connections", l.max_connections, 0);
  t->SetInt("max_connections_per_ip", l.max_connections_per_ip, 0);
  t->ReportUnknownKeys();
}

void ReadUpstream(TableReader& gw, Draft& d) {
  auto t = gw.Table("upstream");
  if (!t) return;
  Upstream& u = d.snap.gateway.upstream;
  t->SetMillis("connect_timeout_ms", u.connect_timeout, 1);
  t->SetMillis("first_token_timeout_ms", u.first_token_timeout, 1);
  t->SetMillis("stream_idle_timeout_ms", u.stream_idle_timeout, 1);
  t->SetInt("max_attempts", u.max_attempts, 1, kMaxAttempts);
  t->SetMillis("retry_deadline_ms", u.retry_deadline, 1);
  t->SetMillis("drain_delay_ms", u.drain_delay, 0);
  t->SetMillis("drain_timeout_ms", u.drain_timeout, 0);
  t->SetInt("retry_budget_percent", u.retry_budget_percent, 0, 100);
  t->SetInt("retry_budget_min", u.retry_budget_min, 0);
  if (auto v = t->Integer("pool_max_idle", 0, std::numeric_limits<uint32_t>::max()))
    u.pool_max_idle = static_cast<uint32_t>(v->value);
  t->SetMillis("pool_idle_timeout_ms", u.pool_idle_timeout, 1);
  t->SetInt("relay_batch", u.relay_batch, 1, 4096);
  t->ReportUnknownKeys();
}

}  // namespace

void ReadGateway(TableReader& root, ReadContext& ctx, Draft& d) {
  bool present = root.Node("gateway") != nullptr;
  auto gw = root.Table("gateway");
  if (!gw) {
    if (!present) {
      ctx.diag.Error(Pos{}, "no [[gateway.listeners]]: at least one listener is required");
    }
    return;
  }
  d.gateway_table = gw->pos();
  Gateway& g = d.snap.gateway;
  if (auto edge = gw->String("edge")) {
    if (CheckIdentifier(*gw, "edge", *edge)) g.edge = edge->value;
  }
  if (auto location = ReadGeoPoint(*gw, "location")) {
    g.location = *location;
    d.gateway_location_set = true;
  }
  gw->SetInt("workers", g.workers, 0, 1024);
  if (auto log = gw->String("access_log")) {
    if (auto path = ResolveOutputFile(*log, "access_log", ctx)) g.access_log = *path;
  }
  gw->Set("residency_header", g.residency_header);

  const toml::node* listeners = gw->Node("listeners");
  for (TableReader& t : gw->TableArray("listeners"))
    ReadListener(t, ctx, d);
  if (listeners == nullptr || (listeners->is_array() && listeners->as_array()->empty())) {
    ctx.diag.Error(gw->pos(), "no [[gateway.listeners]]: at least one listener is required");
  }
  ReadAdmin(*gw, ctx, d);
  ReadLimits(*gw, d);
  ReadUpstream(*gw, d);
  gw->ReportUnknownKeys();
}

}  // namespace geogate::config
