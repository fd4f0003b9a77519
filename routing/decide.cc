#include "routing/decide.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "common/splitmix64.h"

namespace geogate::routing {
namespace {

struct Candidate {
  size_t backend = 0;
  double ettft_ms = 0;
  double rtt_ms = 0;
  double service_ms = 0;
  bool fresh = true;  // its service time is measured, not the prior
  double load = 0;    // utilization / weight: what power of two choices compares
  double weight = 1;
  uint32_t gpu_rank = 0;
  uint8_t tier = 0;
};

// One request in this many explores (see decide.h). Each exploration yields
// a sample that stays fresh for sample_stale_ms, so the cost is about one
// request per unmeasured backend per stale period.
constexpr uint64_t kExploreOneIn = 16;

// Inline capacity covers a typical model's pool; bigger pools spill to the heap.
using Candidates = absl::InlinedVector<Candidate, 16>;

// A routable-but-full or unhealthy backend that serves the request: named
// as the runner-up when it would have come before the winner.
struct Excluded {
  size_t backend = 0;
  double ettft_ms = 0;  // without its queue term: what it offers with a free slot
  uint32_t gpu_rank = 0;
  uint8_t tier = 0;
  const char* why = nullptr;
};
using ExcludedList = absl::InlinedVector<Excluded, 8>;

// Would `e` have been placed before the winner `w` had it been a candidate?
// The same order as Decide: the window around the best (which `e` might
// have set), then GPU rank, tier and expected TTFT.
bool AheadOf(const Excluded& e, const Candidate& w, double best, double slack) {
  const double best_with = std::min(best, e.ettft_ms);
  if (e.ettft_ms > best_with + slack) return false;
  if (w.ettft_ms > best_with + slack) return true;
  if (e.gpu_rank != w.gpu_rank) return e.gpu_rank < w.gpu_rank;
  if (e.tier != w.tier) return e.tier < w.tier;
  return e.ettft_ms < w.ettft_ms;
}

/// The excluded backend that would have come first, among those ahead of `w`.
const Excluded* RunnerUpOut(const ExcludedList& out, const Candidate& w, double best,
                            double slack) {
  const Excluded* first = nullptr;
  for (const Excluded& e : out) {
    if (!AheadOf(e, w, best, slack)) continue;
    if (first == nullptr || std::tie(e.gpu_rank, e.tier, e.ettft_ms) <
                                std::tie(first->gpu_rank, first->tier, first->ettft_ms))
      first = &e;
  }
  return first;
}

/// Position of `gpu` in the model's preference list; unlisted GPUs rank
/// after every listed one, and an empty list ranks everything equal.
uint32_t GpuRank(const config::Model& model, const std::string& gpu) {
  const auto& prefs = model.gpu_preference;
  for (size_t i = 0; i < prefs.size(); ++i)
    if (prefs[i] == gpu) return static_cast<uint32_t>(i);
  return static_cast<uint32_t>(prefs.size());
}

bool TooSmall(const config::Model& model, const config::Backend& b) {
  return model.min_vram_gb && b.vram_gb && *b.vram_gb < *model.min_vram_gb;
}

// Turns the caller's random number into independent draws: splitmix64's
// output for the state `x`.
uint64_t Mix(uint64_t x) {
  return SplitMix64(x);
}

double Unit(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

/// Index in [0, n) drawn with probability proportional to weight, never `skip`.
size_t WeightedPick(const Candidate* c, size_t n, double u, size_t skip) {
  double total = 0;
  for (size_t i = 0; i < n; ++i)
    if (i != skip) total += c[i].weight;
  double target = u * total;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i == skip) continue;
    last = i;
    if (target < c[i].weight) return i;
    target -= c[i].weight;
  }
  return last;  // rounding at the top end
}

void AppendMs(std::string& out, double ms) {
  // One decimal, printf's text (to_chars itself was a quarter of the
  // reason's cost, about 280 instructions a number).
  char buf[common::kFixedBytes];
  out.append(buf, common::WriteFixed(buf, ms, 1));
  out += "ms";
}

const char* LostOn(const char* why) {
  if (why == why::kGpuPreference) return "gpu preference";
  if (why == why::kRunnerUpFull) return "capacity";
  if (why == why::kRunnerUpUnhealthy) return "health";
  return why;  // latency, tier, utilization
}

// Moves to the front the closest candidate whose estimate rests on no fresh
// sample and that would beat the winner by more than tie_ms if it served as
// fast as the winner does (closer, or the winner is queueing). True if it did.
bool Explore(Candidates& c, double tie_ms, uint64_t random) {
  if (c.size() < 2 || Mix(random ^ 0x6a09e667f3bcc909ULL) % kExploreOneIn != 0) return false;
  const Candidate& w = c[0];
  size_t pick = 0;
  for (size_t k = 1; k < c.size(); ++k)
    if (!c[k].fresh && c[k].rtt_ms + w.service_ms + tie_ms < w.ettft_ms &&
        (pick == 0 || c[k].rtt_ms < c[pick].rtt_ms))
      pick = k;
  if (pick == 0) return false;
  std::rotate(c.begin(), c.begin() + static_cast<ptrdiff_t>(pick),
              c.begin() + static_cast<ptrdiff_t>(pick) + 1);
  return true;
}

// Orders the window by (5): brings the winner of power of two choices among
// the leading equals to the front and its rival second. Returns the size of
// that group of equals.
size_t BreakTies(Candidates& c, size_t window, double tie_ms, uint64_t random) {
  size_t equals = 1;
  while (equals < window && c[equals].gpu_rank == c[0].gpu_rank && c[equals].tier == c[0].tier &&
         c[equals].ettft_ms <= c[0].ettft_ms + tie_ms)
    ++equals;
  if (equals < 2) return equals;
  const uint64_t r1 = Mix(random), r2 = Mix(r1);
  const size_t a = WeightedPick(c.data(), equals, Unit(r1), equals);
  const size_t b = WeightedPick(c.data(), equals, Unit(r2), a);
  // The lower utilization per unit of weight wins; a draw goes to the first
  // pick, which is itself weighted, so idle equals share by weight.
  const size_t win = c[b].load < c[a].load ? b : a;
  const size_t lose = win == a ? b : a;
  const Candidate w = c[win], l = c[lose];
  // Keep the others in their order behind the pair.
  size_t out = equals;
  for (size_t i = equals; i-- > 0;)
    if (i != win && i != lose) c[--out] = c[i];
  c[0] = w;
  c[1] = l;
  return equals;
}

void AppendUnrouted(const Decision& d, std::string& out) {
  switch (d.outcome) {
    case Outcome::kResidencyDenied:
      out += "residency_denied: no backend in the allowed regions serves the model";
      return;
    case Outcome::kNoHealthy:
      absl::StrAppend(&out, "no_healthy: 0 of ", d.n_allowed, " allowed backends routable");
      if (d.n_unfit != 0) absl::StrAppend(&out, " (", d.n_unfit, " too small for the model)");
      return;
    case Outcome::kCapacity:
      absl::StrAppend(&out, "capacity: all ", d.n_routable, " routable backends full");
      return;
    case Outcome::kRoute:
      break;
  }
  out += OutcomeName(d.outcome);
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kRoute:
      return "route";
    case Outcome::kResidencyDenied:
      return "residency_denied";
    case Outcome::kNoHealthy:
      return "no_healthy";
    case Outcome::kCapacity:
      return "capacity";
  }
  return "unknown";
}

Decision Decide(const config::Snapshot& snap, const RequestFacts& facts,
                const config::RegionSet& allowed, const HealthView& health, uint64_t random) {
  Decision d;
  const config::Model& model = snap.models[facts.model];
  // TTFT is estimated per (backend, model): a 70B model's first token says
  // little about an 8B model's on the same GPU.
  const uint64_t model_key = health::ModelKey(model.name);
  const bool spot_ok = facts.tenant != nullptr && facts.tenant->allow_spot;

  // (1) Candidates, built from the allowed set only: residency is a filter
  // applied before anything else, never a weight.
  size_t n_allowed = 0, n_unfit = 0, n_routable = 0;
  Candidates c;
  ExcludedList excluded;
  for (size_t idx : snap.backends_by_model[facts.model]) {
    const config::Backend& b = snap.backends[idx];
    if (!allowed.contains(b.region_index)) continue;
    if (b.tier == config::Tier::kSpot && !spot_ok) continue;
    ++n_allowed;
    if (TooSmall(model, b)) {
      ++n_unfit;
      continue;
    }
    const BackendObservation obs = health.Observe(idx, model_key);
    const TtftEstimate est = EstimateTtft(snap, idx, obs);
    const double ettft = est.total_ms();
    const bool routable = obs.routable();
    n_routable += routable;
    if (!routable || obs.inflight >= b.capacity) {
      // Judged by what it would offer with a free slot: being full is the
      // reason it lost, not also a reason to look slow.
      excluded.push_back({idx, est.rtt_ms + est.service_ms, GpuRank(model, b.gpu),
                          static_cast<uint8_t>(b.tier),
                          routable ? why::kRunnerUpFull : why::kRunnerUpUnhealthy});
      continue;
    }
    Candidate& k = c.emplace_back();
    k.backend = idx;
    k.ettft_ms = ettft;
    k.rtt_ms = est.rtt_ms;
    k.service_ms = est.service_ms;
    k.fresh = est.fresh_sample;
    k.weight = b.weight > 0 ? b.weight : 1;
    k.load = est.utilization / k.weight;
    k.gpu_rank = GpuRank(model, b.gpu);
    k.tier = static_cast<uint8_t>(b.tier);
  }
  if (c.empty()) {
    d.outcome = n_allowed == 0    ? Outcome::kResidencyDenied
                : n_routable == 0 ? Outcome::kNoHealthy
                                  : Outcome::kCapacity;
    d.why = OutcomeName(d.outcome);
    d.n_allowed = static_cast<uint32_t>(n_allowed);
    d.n_unfit = static_cast<uint32_t>(n_unfit);
    d.n_routable = static_cast<uint32_t>(n_routable);
    return d;
  }

  // (2) best, (3) window, (4) order inside and outside it.
  double best = c[0].ettft_ms;
  for (const Candidate& k : c)
    best = std::min(best, k.ettft_ms);
  const double slack = static_cast<double>(snap.routing.latency_slack.count());
  auto outside = std::partition(c.begin(), c.end(),
                                [&](const Candidate& k) { return k.ettft_ms <= best + slack; });
  const size_t window = static_cast<size_t>(outside - c.begin());
  std::sort(c.begin(), outside, [](const Candidate& x, const Candidate& y) {
    if (x.gpu_rank != y.gpu_rank) return x.gpu_rank < y.gpu_rank;
    if (x.tier != y.tier) return x.tier < y.tier;
    if (x.ettft_ms != y.ettft_ms) return x.ettft_ms < y.ettft_ms;
    return x.backend < y.backend;
  });
  std::sort(outside, c.end(), [](const Candidate& x, const Candidate& y) {
    if (x.ettft_ms != y.ettft_ms) return x.ettft_ms < y.ettft_ms;
    return x.backend < y.backend;
  });
  // (5) equals.
  const double tie = static_cast<double>(snap.routing.tie.count());
  const size_t equals = BreakTies(c, window, tie, random);
  const bool explored = Explore(c, tie, random);

  for (const Candidate& k : c) {
    d.plan.push_back(k.backend);
    d.expected_ttft_ms.push_back(k.ettft_ms);
  }

  // Why the winner won: exploration; else a backend that would have come
  // first but was full or unhealthy; else the first criterion on which
  // plan[1] lost.
  const Candidate& w = c[0];
  size_t runner = 0;
  double runner_ettft = 0;
  if (explored) {
    d.why = why::kExploration;
    runner = c[1].backend;
    runner_ettft = c[1].ettft_ms;
  } else if (const Excluded* out = RunnerUpOut(excluded, w, best, slack)) {
    d.why = out->why;
    runner = out->backend;
    runner_ettft = out->ettft_ms;
  } else if (c.size() > 1) {
    const Candidate& r = c[1];
    d.why = equals > 1                 ? why::kUtilization
            : window < 2               ? why::kLatency
            : r.gpu_rank != w.gpu_rank ? why::kGpuPreference
            : r.tier != w.tier         ? why::kTier
                                       : why::kLatency;
    runner = r.backend;
    runner_ettft = r.ettft_ms;
  } else {
    d.why = why::kOnlyCandidate;
  }

  if (d.why != why::kOnlyCandidate) {
    d.runner_up = runner;
    d.runner_up_ettft_ms = runner_ettft;
  }
  return d;
}

void Decision::AppendReason(const config::Snapshot& snap, std::string& out) const {
  if (outcome != Outcome::kRoute || plan.empty()) {
    AppendUnrouted(*this, out);
    return;
  }
  out += snap.backends[plan[0]].name;
  out += " ettft=";
  AppendMs(out, expected_ttft_ms[0]);
  if (!runner_up) {
    out += "; only candidate";
    return;
  }
  out += "; runner-up ";
  out += snap.backends[*runner_up].name;
  out += " ettft=";
  AppendMs(out, runner_up_ettft_ms);
  out += " lost on ";
  out += LostOn(why);
}

std::string Decision::Reason(const config::Snapshot& snap) const {
  std::string out;
  AppendReason(snap, out);
  return out;
}

}  // namespace geogate::routing
