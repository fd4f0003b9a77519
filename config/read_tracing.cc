// [tracing]: OpenTelemetry spans exported over OTLP/HTTP JSON
// (docs/tracing.md). Off unless `enabled = true`; then a collector URL
// (http:// or https://) is required. Every other key has a default
// (snapshot.h).
#include "absl/strings/str_cat.h"
#include "config/address.h"
#include "config/sections.h"
#include "config/value_checks.h"

namespace geogate::config {

void ReadTracing(TableReader& root, ReadContext& ctx, Draft& d) {
  auto t = root.Table("tracing");
  if (!t) return;
  Tracing& tr = d.snap.tracing;
  t->Set("enabled", tr.enabled);
  auto url = t->String("collector_url", tr.enabled ? Presence::kRequired : Presence::kOptional);
  if (url) {
    auto parsed = ParseBackendUrl(url->value);
    if (!parsed.ok()) {
      t->diag().Error(url->pos, absl::StrCat(t->Describe("collector_url"), ": ",
                                             std::string(parsed.status().message())));
    } else {
      tr.collector_url = url->value;
      tr.collector_tls = parsed->tls;
      tr.collector_host = parsed->host;
      tr.collector_port = parsed->port;
      tr.tls_at = url->pos;
      // A bare collector address gets OTLP's traces path; a URL with a path
      // is the full endpoint, as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is.
      tr.collector_path = parsed->base_path.empty() ? "/v1/traces" : parsed->base_path;
    }
  }
  if (auto ca_file = t->String("ca_file")) {
    if (auto path = ResolveReadableFile(*ca_file, "CA file", ctx)) {
      tr.ca_file = *path;
      tr.tls_at = ca_file->pos;
    }
    if (url && !tr.collector_url.empty() && !tr.collector_tls)
      ctx.diag.Warning(
          absl::StrCat(t->Describe("ca_file"), " has no effect: collector_url uses http://"));
  }
  if (auto ratio = t->Number("sampling_ratio", 0, 1)) tr.sampling_ratio = ratio->value;
  if (auto name = t->String("service_name")) {
    if (name->value.empty() || name->value.size() > 128) {
      t->diag().Error(name->pos, absl::StrCat(t->Describe("service_name"),
                                              " must be 1 to 128 characters long"));
    } else if (CheckIdentifier(*t, "service_name", *name)) {
      tr.service_name = name->value;
    }
  }
  t->SetInt("batch_size", tr.batch_size, 1, 10000);
  if (auto v = t->Integer("batch_interval_ms", 10, 60000)) tr.batch_interval = Millis(v->value);
  std::optional<Located<int64_t>> limit = t->Integer("queue_limit", 1, 1'000'000);
  if (limit) tr.queue_limit = static_cast<uint32_t>(limit->value);
  if (auto v = t->Integer("export_timeout_ms", 10, 60000)) tr.export_timeout = Millis(v->value);
  if (auto v = t->Integer("connect_timeout_ms", 10, 60000)) tr.connect_timeout = Millis(v->value);
  if (auto v = t->Integer("flush_timeout_ms", 0, 60000)) tr.flush_timeout = Millis(v->value);
  if (limit && tr.queue_limit < tr.batch_size) {
    t->diag().Error(limit->pos,
                    absl::StrCat(t->Describe("queue_limit"), " (", tr.queue_limit,
                                 ") must be at least batch_size (", tr.batch_size, ")"));
  }
  t->ReportUnknownKeys();
}

}  // namespace geogate::config
