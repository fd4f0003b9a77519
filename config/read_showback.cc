// [showback] and [capacity]: where per-minute usage is kept and what the
// scaling signal aims for (docs/showback.md). Every key has a default
// (snapshot.h).
#include "absl/strings/str_cat.h"
#include "config/sections.h"
#include "config/value_checks.h"

namespace geogate::config {

void ReadShowback(TableReader& root, ReadContext& ctx, Draft& d) {
  auto t = root.Table("showback");
  if (!t) return;
  Showback& s = d.snap.showback;
  if (auto file = t->String("file")) {
    // Unlike access_log, "-" (stdout) means nothing here: the file is read
    // back on startup.
    if (file->value == "-") {
      t->diag().Error(file->pos, absl::StrCat(t->Describe("file"),
                                              " must be a file path or \"\" (memory only), "
                                              "not \"-\""));
    } else if (auto path = ResolveOutputFile(*file, "showback file", ctx)) {
      s.file = *path;
    }
  }
  t->SetInt("window_hours", s.window_hours, 1, 8760);
  t->ReportUnknownKeys();
}

void ReadCapacity(TableReader& root, Draft& d) {
  auto t = root.Table("capacity");
  if (!t) return;
  Capacity& c = d.snap.capacity;
  if (auto target = t->Number("target_utilization", 0, 1, /*min_exclusive=*/true))
    c.target_utilization = target->value;
  // Sampling faster than 100 ms adds cost and no signal; slower than a
  // minute leaves the 1-minute window empty.
  if (auto every = t->Integer("sample_interval_ms", 100, 60000))
    c.sample_interval = Millis(every->value);
  t->ReportUnknownKeys();
}

}  // namespace geogate::config
