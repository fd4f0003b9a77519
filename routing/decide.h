// Backend selection (DESIGN.md §4 steps 6-7, §7 "Selection order"): a pure
// function of the snapshot, the request's facts, the residency-allowed region
// set, a view of live health/load and a random number. It returns the
// ordered attempt plan. The plan is built from the allowed set and nothing
// else, so no retry or failover can leave it. Time enters only through the
// view, which is taken at a moment (whether an ejection has run out, how
// fresh a TTFT sample is): Decide itself reads no clock.
//
// Order (docs/routing.md explains it with numbers):
//  1. candidates = allowed ∩ serves the model ∩ fits (min_vram_gb, spot
//     policy) ∩ routable (healthy, not ejected) ∩ below capacity;
//  2. best = the lowest expected TTFT (routing/ttft_estimate.h);
//  3. window = candidates within routing.latency_slack_ms of best;
//  4. in the window: the model's gpu_preference rank, then tier (reserved,
//     on-demand, spot), then expected TTFT;
//  5. the first candidates of the window that share rank and tier and lie
//     within routing.tie_ms of each other are equals: power of two choices
//     (weighted by `weight`) on utilization picks the winner among them.
// Candidates outside the window follow by expected TTFT, as failover targets.
// Exploration: one request in 16 goes first to a candidate whose estimate
// rests on no fresh TTFT sample but that would beat the winner by more than
// tie_ms if it served as fast as the winner (it is closer, or the winner
// queues), so a backend judged on the prior or on an old slow sample gets
// measured again instead of staying behind for good.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/inlined_vector.h"
#include "config/region_set.h"
#include "config/snapshot.h"
#include "routing/ttft_estimate.h"

namespace geogate::routing {

class HealthView {
 public:
  virtual ~HealthView() = default;
  /// @param backend index into Snapshot::backends.
  /// @param model_key health::ModelKey of the request's model: the observed
  ///   TTFT is that model's on this backend; 0 = the backend-wide one.
  virtual BackendObservation Observe(size_t backend, uint64_t model_key) const = 0;
};

struct RequestFacts {
  size_t model = 0;                        // index into Snapshot::models
  const config::Tenant* tenant = nullptr;  // null = anonymous
};

enum class Outcome : uint8_t {
  kRoute,            // plan holds at least one backend
  kResidencyDenied,  // the model is served only outside the allowed set (451)
  kNoHealthy,        // allowed backends exist for the model, none routable (503)
  kCapacity,         // routable ones exist, all at capacity (429)
};
const char* OutcomeName(Outcome o);

/// Why the winner won, in a fixed vocabulary (a metric label). For a routed
/// request: the first criterion on which the runner-up lost. Otherwise the
/// outcome's name.
namespace why {
inline constexpr const char* kOnlyCandidate = "only_candidate";
inline constexpr const char* kLatency = "latency";  // runner-up slower
inline constexpr const char* kGpuPreference = "gpu_preference";
inline constexpr const char* kTier = "tier";
inline constexpr const char* kUtilization = "utilization";      // equals: power of two choices
inline constexpr const char* kRunnerUpFull = "runner_up_full";  // a faster one was at capacity
inline constexpr const char* kRunnerUpUnhealthy = "runner_up_unhealthy";  // ... or not routable
inline constexpr const char* kExploration = "exploration";  // measuring an unmeasured one
}  // namespace why

/// Backend indices, best first. Inline: built per request, and a model's
/// pool rarely has more than 16 backends.
using Plan = absl::InlinedVector<size_t, 16>;

struct Decision {
  Outcome outcome = Outcome::kRoute;
  Plan plan;  // backend indices, best first
  /// Per plan entry: the expected TTFT the selector computed (ms).
  absl::InlinedVector<double, 16> expected_ttft_ms;
  /// A why:: constant, or OutcomeName(outcome) when not routed. Static storage.
  const char* why = why::kOnlyCandidate;
  /// The runner-up named in the reason (index into Snapshot::backends), if
  /// any: plan[1], or a faster backend that was full or unhealthy.
  std::optional<size_t> runner_up;
  double runner_up_ettft_ms = 0;
  /// When not routed: backends of the model in the allowed regions, those
  /// too small for it, and those routable.
  uint32_t n_allowed = 0, n_unfit = 0, n_routable = 0;

  /// For the access log: winner, its expected TTFT, the runner-up and why it
  /// lost, e.g. "eu-1 ettft=42.1ms; runner-up eu-2 ettft=44.0ms lost on tier".
  /// Rendered from the facts above only when a line is written, so that
  /// deciding allocates nothing. `snap` is the snapshot that decided.
  void AppendReason(const config::Snapshot& snap, std::string& out) const;
  std::string Reason(const config::Snapshot& snap) const;
};

Decision Decide(const config::Snapshot& snap, const RequestFacts& facts,
                const config::RegionSet& allowed, const HealthView& health, uint64_t random);

}  // namespace geogate::routing
