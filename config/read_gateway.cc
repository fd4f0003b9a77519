// [gateway], its listeners, admin endpoint, limits and upstream behaviour.
#include <limits>

#include "absl/strings/str_cat.h"
#include "config/address.h"
#include "config/sections.h"
#include "config/value_checks.h"

namespace geogate::config {
namespace {

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
    tls->ReportUnknownKeys();
    std::optional<std::string> cert_path, key_path;
    if (cert) cert_path = ResolveReadableFile(*cert, "TLS certificate file", ctx);
    if (key) key_path = ResolveReadableFile(*key, "TLS key file", ctx);
    if (cert_path && key_path) l.tls = TlsFiles{*cert_path, *key_path, cert->pos, key->pos};
  }
  t.Set("proxy_protocol", l.proxy_protocol);
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
  t->SetInt("max_attempts", u.max_attempts, 1, 10);
  t->SetMillis("retry_deadline_ms", u.retry_deadline, 1);
  t->SetMillis("drain_delay_ms", u.drain_delay, 0);
  t->SetMillis("drain_timeout_ms", u.drain_timeout, 0);
  t->SetInt("retry_budget_percent", u.retry_budget_percent, 0, 100);
  t->SetInt("retry_budget_min", u.retry_budget_min, 0);
  t->SetInt("pool_max_idle", u.pool_max_idle, 0);
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
