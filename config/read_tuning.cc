// [health] and [routing]: the knobs of the prober, the outlier detector and
// backend selection. Every key has a default (snapshot.h).
#include "absl/strings/str_cat.h"
#include "config/sections.h"

namespace geogate::config {
namespace {

bool IsHttpPath(const std::string& s) {
  if (s.empty() || s.front() != '/') return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
  }
  return true;
}

}  // namespace

void ReadHealth(TableReader& root, Draft& d) {
  auto t = root.Table("health");
  if (!t) return;
  Health& h = d.snap.health;
  if (auto path = t->String("path")) {
    if (IsHttpPath(path->value)) {
      h.path = path->value;
    } else {
      t->diag().Error(path->pos, absl::StrCat(t->Describe("path"),
                                              " must be an HTTP path starting with '/', got '",
                                              path->value, "'"));
    }
  }
  t->SetMillis("interval_ms", h.interval, 1);
  t->SetMillis("timeout_ms", h.timeout, 1);
  t->SetInt("unhealthy_threshold", h.unhealthy_threshold, 1);
  t->SetInt("healthy_threshold", h.healthy_threshold, 1);
  t->SetMillis("changing_interval_ms", h.changing_interval, 1);
  t->SetInt("jitter_percent", h.jitter_percent, 0, 100);
  t->SetInt("outlier_consecutive_failures", h.outlier_consecutive_failures, 1);
  t->SetMillis("outlier_base_ejection_ms", h.outlier_base_ejection, 1);
  auto max_ejection = t->Integer("outlier_max_ejection_ms", 1, kMaxMillis);
  if (max_ejection) h.outlier_max_ejection = Millis(max_ejection->value);
  t->SetInt("max_ejection_percent", h.max_ejection_percent, 0, 100);
  if (auto report = t->String("load_report")) {
    if (report->value == "auto" || report->value == "off" || IsHttpPath(report->value)) {
      h.load_report = report->value;
    } else {
      t->diag().Error(report->pos,
                      absl::StrCat(t->Describe("load_report"),
                                   " must be \"auto\", \"off\" or an HTTP path like \"/load\", "
                                   "got \"",
                                   report->value, "\""));
    }
  }
  if (h.outlier_max_ejection < h.outlier_base_ejection) {
    // The ejection time grows from base to max; max below base is a typo.
    Pos at = max_ejection ? max_ejection->pos : t->pos();
    t->diag().Error(at, absl::StrCat("outlier_max_ejection_ms (", h.outlier_max_ejection.count(),
                                     ") in [health] is less than outlier_base_ejection_ms (",
                                     h.outlier_base_ejection.count(), ")"));
  }
  t->ReportUnknownKeys();
}

void ReadRouting(TableReader& root, Draft& d) {
  auto t = root.Table("routing");
  if (!t) return;
  Routing& r = d.snap.routing;
  t->SetMillis("latency_slack_ms", r.latency_slack, 0);
  t->SetMillis("tie_ms", r.tie, 0);
  t->SetMillis("prior_ttft_ms", r.prior_ttft, 0);
  t->SetMillis("queue_timeout_ms", r.queue_timeout, 0);
  if (auto alpha = t->Number("ewma_alpha", 0, 1, /*min_exclusive=*/true))
    r.ewma_alpha = alpha->value;
  t->SetMillis("sample_stale_ms", r.sample_stale, 1);
  t->ReportUnknownKeys();
}

}  // namespace geogate::config
