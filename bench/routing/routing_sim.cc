// Routing simulation (a benchmark, not a test): a discrete-event model of
// five edges sending a mixed LLM workload to GPU backends in five regions.
// Each request is placed by one of three policies, on the same request
// sequence:
//   geogate      the real routing::Decide, fed by what an edge can know:
//                probe RTT and load reports every 100 ms, its own in-flight
//                counts, TTFT EWMAs of its own streams per (backend, model)
//                as the gateway keeps them;
//   round-robin  rotates over the same candidates (allowed, serving, fitting,
//                healthy), blind to latency and load;
//   oracle       knows the true RTT, every backend's true queue and when
//                each running stream ends, and sends each request where its
//                first token comes soonest (greedy, tier-blind).
// Backends model continuous batching: `capacity` slots, a FIFO queue behind
// them, prefill and decode slowed by the batch they join. The physics are
// written from how such servers behave, not from geogate's formula.
//
//   build/bench/routing/geogate_routing_sim [--seconds N] [--seed S] [--routing 'K = V; ...']
// prints a Markdown table (bench/RESULTS.md "## Routing" holds a copy).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config/loader.h"
#include "routing/decide.h"

namespace {

using geogate::config::RegionSet;
using geogate::config::Snapshot;
using geogate::config::SnapshotConstPtr;
using geogate::config::Tier;
namespace routing = geogate::routing;
namespace health = geogate::health;

// ---------------------------------------------------------------- the world

struct RegionDef {
  const char* name;
  const char* jurisdiction;
  double lat, lon;
};
const RegionDef kRegions[] = {
    {"eu-west", "EU", 53.35, -6.26},        {"eu-central", "EU", 50.11, 8.68},
    {"us-east", "US", 38.90, -77.04},       {"us-west", "US", 45.60, -121.20},
    {"ap-southeast", "APAC", 1.35, 103.82},
};

struct EdgeDef {
  const char* name;
  double lat, lon;
  double peak_rps;  // requests per second at the top of its daily curve
  double phase;     // of the daily curve, in cycles
  bool eu;          // half of its clients are governed: EU regions only
};
const EdgeDef kEdges[] = {
    {"fra", 50.11, 8.68, 16, 0.00, true},    {"lhr", 51.50, -0.12, 14, 0.05, true},
    {"iad", 38.90, -77.04, 18, 0.30, false}, {"sfo", 37.60, -122.40, 14, 0.38, false},
    {"sin", 1.35, 103.82, 12, 0.65, false},
};

enum Model { kSmall = 0, kLarge = 1 };

struct GpuPerf {
  double prefill_ms[2];  // by model; < 0: cannot serve it
  double tpot_ms[2];     // time per output token
};
const GpuPerf kL4{{45, -1}, {28, -1}};
const GpuPerf kH100{{16, 130}, {10, 32}};

struct BackendDef {
  std::string name;
  size_t region;
  const char* gpu;
  Tier tier;
  uint32_t slots;
  double vram;
  bool large;  // serves the large model too
};

std::vector<BackendDef> Fleet() {
  std::vector<BackendDef> out;
  for (size_t r = 0; r < std::size(kRegions); ++r) {
    std::string p = kRegions[r].name;
    out.push_back({p + "-l4-res-1", r, "L4", Tier::kReserved, 24, 24, false});
    out.push_back({p + "-l4-res-2", r, "L4", Tier::kReserved, 24, 24, false});
    out.push_back({p + "-l4-od-1", r, "L4", Tier::kOnDemand, 24, 24, false});
    out.push_back({p + "-h100-res-1", r, "H100", Tier::kReserved, 32, 80, true});
    out.push_back({p + "-h100-od-1", r, "H100", Tier::kOnDemand, 32, 80, true});
    if (r == 1 || r == 2) out.push_back({p + "-h100-spot-1", r, "H100", Tier::kSpot, 32, 80, true});
  }
  return out;
}

const char* TierText(Tier t) {
  return t == Tier::kReserved ? "reserved" : t == Tier::kOnDemand ? "on-demand" : "spot";
}

// The same fleet as geogate.toml for one edge, through the real loader.
SnapshotConstPtr EdgeSnapshot(const EdgeDef& e, const std::vector<BackendDef>& fleet,
                              const std::string& routing_extra) {
  std::string t = absl::StrCat("[gateway]\nedge = \"", e.name, "\"\nlocation = { lat = ", e.lat,
                               ", lon = ", e.lon,
                               " }\n[[gateway.listeners]]\naddress = \"127.0.0.1:0\"\n"
                               "[routing]\nqueue_timeout_ms = 2000\n",
                               routing_extra);
  for (const RegionDef& r : kRegions)
    absl::StrAppend(&t, "[[regions]]\nname = \"", r.name, "\"\njurisdiction = \"", r.jurisdiction,
                    "\"\nlocation = { lat = ", r.lat, ", lon = ", r.lon, " }\n");
  int port = 8000;
  for (const BackendDef& b : fleet)
    absl::StrAppend(&t, "[[backends]]\nname = \"", b.name, "\"\nregion = \"",
                    kRegions[b.region].name, "\"\nurl = \"http://10.0.0.1:", port++,
                    "\"\nmodels = ", b.large ? "[\"small\", \"large\"]" : "[\"small\"]",
                    "\ngpu = \"", b.gpu, "\"\ntier = \"", TierText(b.tier),
                    "\"\ncapacity = ", b.slots, "\nvram_gb = ", b.vram, "\n");
  absl::StrAppend(&t,
                  "[[models]]\nname = \"small\"\ngpu_preference = [\"L4\", \"H100\"]\n"
                  "[[models]]\nname = \"large\"\nmin_vram_gb = 80\n");
  auto r = geogate::config::LoadString(t, "sim.toml", "/tmp",
                                       [](const std::string&) { return std::nullopt; });
  if (!r.ok()) {
    for (const auto& err : r.errors)
      std::fprintf(stderr, "%s\n", err.ToString().c_str());
    std::exit(1);
  }
  return r.snapshot;
}

// Real paths are longer than great circles: 1.25 ms per 100 km plus 2 ms.
double TrueRttMs(const EdgeDef& e, const RegionDef& r) {
  return 2 + 1.25 * routing::HaversineKm({e.lat, e.lon}, {r.lat, r.lon}) / 100;
}

// ----------------------------------------------------------- the workload

struct Request {
  double arrive = 0;
  size_t edge = 0;
  Model model = kSmall;
  bool governed = false;  // EU-only
  bool spot_ok = false;
  double prompt = 1;  // prefill multiplier (prompt length)
  int tokens = 0;
};

constexpr double kDayMs = 600'000;  // one compressed "day" of traffic

std::vector<Request> Workload(double seconds, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Request> out;
  std::lognormal_distribution<double> prompt(-0.18, 0.6);  // mean 1, long tail
  std::exponential_distribution<double> tokens(1.0 / 150);
  for (size_t e = 0; e < std::size(kEdges); ++e) {
    const EdgeDef& ed = kEdges[e];
    // Poisson with a daily curve, by thinning against the peak rate.
    std::exponential_distribution<double> gap(ed.peak_rps / 1000);
    std::uniform_real_distribution<double> u(0, 1);
    for (double t = gap(rng); t < seconds * 1000; t += gap(rng)) {
      double level = 0.55 + 0.45 * std::sin(2 * M_PI * (t / kDayMs + ed.phase));
      if (u(rng) > level) continue;
      Request q;
      q.arrive = t;
      q.edge = e;
      q.model = u(rng) < 0.75 ? kSmall : kLarge;
      q.governed = ed.eu && u(rng) < 0.5;
      q.spot_ok = u(rng) < 0.3;
      q.prompt = prompt(rng);
      q.tokens = std::clamp(static_cast<int>(tokens(rng)), 8, 1500);
      out.push_back(q);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Request& a, const Request& b) { return a.arrive < b.arrive; });
  return out;
}

// -------------------------------------------------------------- simulation

enum class Policy { kGeogate, kRoundRobin, kOracle };

struct Variant {
  std::string name;
  Policy policy = Policy::kGeogate;
  std::string routing;    // extra [routing] keys for geogate.toml
  bool per_model = true;  // TTFT EWMA per (backend, model), as the gateway; false: per backend
};

// One edge's knowledge of one backend (the HealthTable entry).
struct EdgeView {
  double rtt_ewma = -1, ttft_ewma = -1, ttft_at = 0;
  double model_ewma[2] = {-1, -1}, model_at[2] = {0, 0};  // per (backend, model)
  uint32_t inflight = 0;
  double load_at = -1;
  int32_t load_running = -1, load_waiting = -1;
  float load_kv = -1;
  double healthy_since = 0;
};

struct Live {  // one request in the system
  size_t req = 0;
  size_t backend = 0;
  double dispatched = 0;  // left the edge
  double ttft = 0;        // as the edge measures it, plus any wait at the edge
  double edge_wait = 0;
  double hold = 0;  // slot time after admission
};

struct BackendSim {
  uint32_t slots = 0;
  uint32_t running = 0;
  std::deque<size_t> waiting;  // Live indices
  std::multiset<double> ends;  // end times of running streams (the oracle reads them)
  bool up = true;
  double busy_integral = 0;  // slot-ms, for time-averaged utilization
  double last_change = 0;
};

struct Event {
  double t;
  uint64_t seq;
  std::function<void()> fn;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct Result {
  std::vector<double> ttft;  // per served request
  std::vector<double> ttft_by_model[2];
  std::vector<double> wait;  // time without a slot at the backend
  size_t rejected = 0;
  size_t out_of_region = 0;      // served outside the region nearest the edge
  double reserved_util = 0;      // time-averaged, over reserved backends
  double reserved_at_spill = 0;  // mean reserved occupancy at on-demand dispatches
  size_t spills = 0;
};

class Sim {
 public:
  Sim(const Variant& v, const std::vector<Request>& reqs, double seconds)
      : policy_(v.policy),
        per_model_(v.per_model),
        reqs_(reqs),
        end_ms_(seconds * 1000),
        fleet_(Fleet()),
        rng_(99) {
    for (const EdgeDef& e : kEdges)
      snaps_.push_back(EdgeSnapshot(e, fleet_, v.routing));
    backends_.resize(fleet_.size());
    for (size_t b = 0; b < fleet_.size(); ++b)
      backends_[b].slots = fleet_[b].slots;
    views_.assign(std::size(kEdges), std::vector<EdgeView>(fleet_.size()));
    rr_.assign(std::size(kEdges), 0);
    nearest_region_.assign(std::size(kEdges), 0);
    for (size_t e = 0; e < std::size(kEdges); ++e)
      for (size_t r = 1; r < std::size(kRegions); ++r)
        if (TrueRttMs(kEdges[e], kRegions[r]) < TrueRttMs(kEdges[e], kRegions[nearest_region_[e]]))
          nearest_region_[e] = r;
  }

  Result Run() {
    for (size_t e = 0; e < std::size(kEdges); ++e)
      At(Uniform() * 100, [this, e] { Probe(e); });
    for (size_t i = 0; i < reqs_.size(); ++i)
      At(reqs_[i].arrive, [this, i] { Arrive(i, reqs_[i].arrive); });
    // One outage: a reserved L4 in eu-central is down for a minute.
    const size_t victim = snaps_[0]->backend_by_name.at("eu-central-l4-res-1");
    At(end_ms_ * 0.4, [this, victim] { SetUp(victim, false); });
    At(end_ms_ * 0.4 + 60'000, [this, victim] { SetUp(victim, true); });
    while (!events_.empty()) {
      Event ev = events_.top();
      events_.pop();
      now_ = ev.t;
      ev.fn();
    }
    Result r = std::move(result_);
    double reserved_slots = 0, busy = 0;
    for (size_t b = 0; b < fleet_.size(); ++b) {
      Account(b);
      if (fleet_[b].tier == Tier::kReserved) {
        reserved_slots += fleet_[b].slots;
        busy += backends_[b].busy_integral;
      }
    }
    r.reserved_util = busy / (reserved_slots * now_);
    if (r.spills) r.reserved_at_spill /= static_cast<double>(r.spills);
    return r;
  }

 private:
  void At(double t, std::function<void()> fn) { events_.push({t, seq_++, std::move(fn)}); }
  double Alpha() const { return snaps_[0]->routing.ewma_alpha; }
  double Uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }

  double Rtt(size_t edge, size_t b) const {
    return TrueRttMs(kEdges[edge], kRegions[fleet_[b].region]);
  }

  void Account(size_t b) {
    BackendSim& s = backends_[b];
    s.busy_integral += s.running * (now_ - s.last_change);
    s.last_change = now_;
  }

  void SetUp(size_t b, bool up) {
    backends_[b].up = up;
    if (!up) return;
    // The health module on return: TTFT EWMA cleared, RTT EWMA restarted.
    for (auto& edge : views_) {
      edge[b].ttft_ewma = -1;
      edge[b].ttft_at = 0;
      edge[b].model_ewma[0] = edge[b].model_ewma[1] = -1;
      edge[b].rtt_ewma = -1;
      edge[b].healthy_since = now_;
    }
  }

  // Probes every 100 ms: RTT with 3 % noise, and the backend's load report.
  void Probe(size_t edge) {
    if (now_ > end_ms_ + 120'000) return;
    std::normal_distribution<double> noise(1, 0.03);
    for (size_t b = 0; b < fleet_.size(); ++b) {
      if (!backends_[b].up) continue;
      EdgeView& v = views_[edge][b];
      double sample = Rtt(edge, b) * noise(rng_);
      v.rtt_ewma = v.rtt_ewma < 0 ? sample : v.rtt_ewma + Alpha() * (sample - v.rtt_ewma);
      v.load_at = now_;
      v.load_running = static_cast<int32_t>(backends_[b].running);
      v.load_waiting = static_cast<int32_t>(backends_[b].waiting.size());
      v.load_kv = static_cast<float>(backends_[b].running) / backends_[b].slots;
    }
    At(now_ + 100, [this, edge] { Probe(edge); });
  }

  bool Fits(const Request& q, size_t b) const {
    const BackendDef& d = fleet_[b];
    if (q.model == kLarge && !d.large) return false;
    if (d.tier == Tier::kSpot && !q.spot_ok) return false;
    if (q.governed && std::strcmp(kRegions[d.region].jurisdiction, "EU") != 0) return false;
    return backends_[b].up;
  }

  void Arrive(size_t i, double first_try) {
    const Request& q = reqs_[i];
    size_t chosen = SIZE_MAX;
    if (policy_ == Policy::kGeogate) {
      chosen = Geogate(q);
      if (chosen == SIZE_MAX) {  // every candidate full: wait like the gateway does
        if (now_ - first_try + 5 <= 2000) {
          At(now_ + 5, [this, i, first_try] { Arrive(i, first_try); });
        } else {
          result_.rejected++;
        }
        return;
      }
    } else {
      std::vector<size_t> cands;
      for (size_t b = 0; b < fleet_.size(); ++b)
        if (Fits(q, b)) cands.push_back(b);
      if (policy_ == Policy::kRoundRobin) {
        chosen = cands[rr_[q.edge]++ % cands.size()];
      } else {
        double best = 1e18;
        for (size_t b : cands) {
          double p = OraclePredict(q, b);
          if (p < best) best = p, chosen = b;
        }
      }
    }
    Dispatch(i, chosen, now_ - first_try);
  }

  size_t Geogate(const Request& q) {
    class View final : public routing::HealthView {
     public:
      View(const Sim& s, size_t edge, int model) : s_(s), edge_(edge), model_(model) {}
      routing::BackendObservation Observe(size_t b, uint64_t /*model_key*/) const override {
        const EdgeView& v = s_.views_[edge_][b];
        routing::BackendObservation o;
        o.state = s_.backends_[b].up && v.rtt_ewma >= 0 ? health::HealthState::kHealthy
                                                        : health::HealthState::kUnhealthy;
        o.rtt_ms = v.rtt_ewma;
        o.ttft_ms = s_.per_model_ ? v.model_ewma[model_] : v.ttft_ewma;
        double at = s_.per_model_ ? v.model_at[model_] : v.ttft_at;
        o.ttft_age_ms = o.ttft_ms < 0 ? 0 : s_.now_ - at;
        o.inflight = v.inflight;
        if (v.load_at >= 0) {
          o.load.at_ns = 1;
          o.load.inflight = v.load_running;
          o.load.queue_depth = v.load_waiting;
          o.load.kv_cache_utilization = v.load_kv;
          o.load_age_ms = s_.now_ - v.load_at;
        }
        o.since_healthy_ms = s_.now_ - v.healthy_since;
        return o;
      }

     private:
      const Sim& s_;
      size_t edge_;
      int model_;
    };
    const Snapshot& snap = *snaps_[q.edge];
    RegionSet allowed = snap.AllRegions();
    if (q.governed) allowed = snap.regions_by_jurisdiction.at("EU");
    geogate::config::Tenant tenant;
    tenant.allow_spot = q.spot_ok;
    routing::RequestFacts facts{
        q.model == kSmall ? snap.model_by_name.at("small") : snap.model_by_name.at("large"),
        &tenant};
    View view(*this, q.edge, q.model);
    routing::Decision d = routing::Decide(snap, facts, allowed, view, rng_());
    if (d.outcome == routing::Outcome::kRoute) {
      why_[d.why]++;
      return d.plan[0];
    }
    return SIZE_MAX;
  }

  double PrefillMs(const Request& q, size_t b, double running) const {
    const GpuPerf& g = std::strcmp(fleet_[b].gpu, "L4") == 0 ? kL4 : kH100;
    return g.prefill_ms[q.model] * (1 + 0.5 * running / fleet_[b].slots);
  }

  // True TTFT if sent to b now, from the true queue and stream end times.
  double OraclePredict(const Request& q, size_t b) const {
    const BackendSim& s = backends_[b];
    double wait = 0;
    size_t position = s.waiting.size() + 1;  // ours
    if (s.running + s.waiting.size() >= s.slots) {
      if (position <= s.ends.size()) {
        wait = *std::next(s.ends.begin(), static_cast<long>(position - 1)) - now_;
      } else {
        // Deeper than the running streams (rare): a typical stream length
        // per slot for the rest.
        wait = *s.ends.rbegin() - now_ + 3000.0 * (position - s.ends.size()) / s.slots;
      }
    }
    double running = std::min<double>(s.running + s.waiting.size(), s.slots);
    return Rtt(q.edge, b) + std::max(0.0, wait) + PrefillMs(q, b, running);
  }

  void Dispatch(size_t i, size_t b, double edge_wait) {
    const Request& q = reqs_[i];
    if (fleet_[b].region != nearest_region_[q.edge]) result_.out_of_region++;
    if (fleet_[b].tier == Tier::kOnDemand) {
      // How full were the reserved backends of this region that could have
      // taken the request?
      double busy = 0, slots = 0;
      for (size_t r = 0; r < fleet_.size(); ++r) {
        if (fleet_[r].region != fleet_[b].region || fleet_[r].tier != Tier::kReserved) continue;
        if (std::strcmp(fleet_[r].gpu, fleet_[b].gpu) != 0 || !Fits(q, r)) continue;
        busy += std::min<double>(backends_[r].running + backends_[r].waiting.size(),
                                 backends_[r].slots);
        slots += backends_[r].slots;
      }
      if (slots > 0) {
        result_.reserved_at_spill += busy / slots;
        result_.spills++;
      }
      od_++;
    }
    size_t id = live_.size();
    live_.push_back({i, b, now_, 0, edge_wait, 0});
    views_[q.edge][b].inflight++;
    At(now_ + Rtt(q.edge, b) / 2, [this, id] { AtBackend(id); });
  }

  void AtBackend(size_t id) {
    BackendSim& s = backends_[live_[id].backend];
    if (s.running < s.slots && s.waiting.empty()) {
      Admit(id);
    } else {
      s.waiting.push_back(id);
    }
  }

  void Admit(size_t id) {
    Live& l = live_[id];
    if (reqs_[l.req].arrive >= 60'000)
      result_.wait.push_back(now_ - l.dispatched - Rtt(reqs_[l.req].edge, l.backend) / 2);
    const Request& q = reqs_[l.req];
    BackendSim& s = backends_[l.backend];
    Account(l.backend);
    const double load = static_cast<double>(s.running) / s.slots;
    const GpuPerf& g = std::strcmp(fleet_[l.backend].gpu, "L4") == 0 ? kL4 : kH100;
    const double prefill = PrefillMs(q, l.backend, s.running) * q.prompt;
    const double decode = q.tokens * g.tpot_ms[q.model] * (1 + 0.5 * load);
    s.running++;
    l.hold = prefill + decode;
    s.ends.insert(now_ + l.hold);
    const double half = Rtt(q.edge, l.backend) / 2;
    At(now_ + prefill + half, [this, id] { FirstTokenAtEdge(id); });
    At(now_ + l.hold, [this, id] { Finish(id); });
  }

  void FirstTokenAtEdge(size_t id) {
    Live& l = live_[id];
    const Request& q = reqs_[l.req];
    const double measured = now_ - l.dispatched;  // what the gateway times
    l.ttft = measured + l.edge_wait;
    if (q.arrive >= 60'000) {  // after warm-up
      result_.ttft.push_back(l.ttft);
      result_.ttft_by_model[q.model].push_back(l.ttft);
    }
    EdgeView& v = views_[q.edge][l.backend];
    v.ttft_ewma = v.ttft_ewma < 0 ? measured : v.ttft_ewma + Alpha() * (measured - v.ttft_ewma);
    v.ttft_at = now_;
    double& m = v.model_ewma[q.model];
    m = m < 0 ? measured : m + Alpha() * (measured - m);
    v.model_at[q.model] = now_;
  }

  void Finish(size_t id) {
    Live& l = live_[id];
    BackendSim& s = backends_[l.backend];
    Account(l.backend);
    s.running--;
    s.ends.erase(s.ends.find(now_));
    const Request& q = reqs_[l.req];
    At(now_ + Rtt(q.edge, l.backend) / 2,
       [this, id] { views_[reqs_[live_[id].req].edge][live_[id].backend].inflight--; });
    if (!s.waiting.empty()) {
      size_t next = s.waiting.front();
      s.waiting.pop_front();
      Admit(next);
    }
  }

  Policy policy_;
  bool per_model_;
  const std::vector<Request>& reqs_;
  double end_ms_;
  std::vector<BackendDef> fleet_;
  std::mt19937_64 rng_;
  std::vector<SnapshotConstPtr> snaps_;
  std::vector<BackendSim> backends_;
  std::vector<std::vector<EdgeView>> views_;
  std::vector<size_t> rr_;
  std::vector<size_t> nearest_region_;
  std::vector<Live> live_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  double now_ = 0;
  Result result_;
  size_t od_ = 0;

 public:
  std::map<std::string, size_t> why_;
  size_t on_demand() const { return od_; }
  size_t served() const { return live_.size(); }
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

// Share of admissions that found no free slot.
double Waited(const std::vector<double>& waits) {
  size_t n = 0;
  for (double w : waits)
    n += w > 0.5;
  return waits.empty() ? 0 : static_cast<double>(n) / static_cast<double>(waits.size());
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: geogate_routing_sim [--seconds N] [--seed S] [--routing 'KEY = V; ...']...\n"
               "  --seconds N   simulated traffic, in seconds (default 1800)\n"
               "  --seed S      workload seed (default 1)\n"
               "  --routing R   add a geogate row with these [routing] keys over the\n"
               "                defaults ('; ' separates keys), e.g.\n"
               "                --routing 'ewma_alpha = 0.1; latency_slack_ms = 60'\n"
               "Prints a Markdown table (bench/RESULTS.md \"## Routing\" holds a copy).\n");
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1800;
  uint64_t seed = 1;
  std::vector<std::string> extra;  // --routing rows
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      Usage(stdout);
      return 0;
    } else if (std::strcmp(argv[i], "--seconds") == 0 && has_value) {
      seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--seed") == 0 && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--routing") == 0 && has_value) {
      extra.emplace_back(argv[++i]);
    } else {
      std::fprintf(stderr, "geogate_routing_sim: bad argument '%s'\n", argv[i]);
      Usage(stderr);
      return 2;
    }
  }
  if (!(seconds > 60)) {
    std::fprintf(stderr, "geogate_routing_sim: --seconds must be above 60 (the warm-up)\n");
    return 2;
  }
  const std::vector<Request> reqs = Workload(seconds, seed);
  // The gateway keeps one TTFT EWMA per (backend, model) (DESIGN.md §8);
  // the per-backend row shows what it did before. Rows other than the
  // defaults name both keys, so they do not move when a default does.
  const geogate::config::Routing def;
  std::vector<Variant> variants = {
      {"oracle (true queues, tier-blind)", Policy::kOracle, "", false},
      {absl::StrCat("**geogate**, defaults (ewma_alpha = ", def.ewma_alpha,
                    ", latency_slack_ms = ", def.latency_slack.count(), ")"),
       Policy::kGeogate, "", true},
      {"geogate, defaults, one TTFT EWMA per backend (old estimator)", Policy::kGeogate, "", false},
      {"geogate, old defaults: ewma_alpha = 0.3, latency_slack_ms = 20", Policy::kGeogate,
       "ewma_alpha = 0.3\nlatency_slack_ms = 20\n", true},
      {"geogate, ewma_alpha = 0.3, latency_slack_ms = 80", Policy::kGeogate,
       "ewma_alpha = 0.3\nlatency_slack_ms = 80\n", true},
      {"geogate, ewma_alpha = 0.05, latency_slack_ms = 20", Policy::kGeogate,
       "ewma_alpha = 0.05\nlatency_slack_ms = 20\n", true},
      {"geogate, ewma_alpha = 0.05, latency_slack_ms = 100", Policy::kGeogate,
       "ewma_alpha = 0.05\nlatency_slack_ms = 100\n", true},
  };
  for (const std::string& keys : extra) {
    std::string toml = keys;
    std::replace(toml.begin(), toml.end(), ';', '\n');
    variants.push_back({"geogate, " + keys, Policy::kGeogate, toml + "\n", true});
  }
  variants.push_back({"round-robin", Policy::kRoundRobin, "", false});
  std::printf(
      "%zu requests over %.0f s (seed %llu); figures over requests arriving after "
      "the first 60 s.\n\n",
      reqs.size(), seconds, static_cast<unsigned long long>(seed));
  std::printf(
      "| policy | mean TTFT | p50 | p99 | p99 vs oracle | p99 small | p99 large | waited for a "
      "slot "
      "| outside nearest region | on-demand share | reserved util (time avg) | reserved util "
      "when on-demand takes a request | 429 |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  double oracle_p99 = 0;
  std::map<std::string, size_t> why;
  for (const Variant& v : variants) {
    Sim sim(v, reqs, seconds);
    Result r = sim.Run();
    const double served = static_cast<double>(sim.served());
    const double p99 = Percentile(r.ttft, 0.99);
    if (v.policy == Policy::kOracle) oracle_p99 = p99;
    if (v.name.rfind("**geogate**", 0) == 0) why = sim.why_;
    std::printf(
        "| %s | %.1f | %.1f | %.1f | %+.1f %% | %.1f | %.1f | %.2f %% | %.1f %% | %.1f %% | %.1f "
        "%% "
        "| %.1f %% | %zu |\n",
        v.name.c_str(), Mean(r.ttft), Percentile(r.ttft, 0.5), p99, 100 * (p99 / oracle_p99 - 1),
        Percentile(r.ttft_by_model[kSmall], 0.99), Percentile(r.ttft_by_model[kLarge], 0.99),
        100.0 * Waited(r.wait), 100.0 * static_cast<double>(r.out_of_region) / served,
        100.0 * static_cast<double>(sim.on_demand()) / served, 100 * r.reserved_util,
        100 * r.reserved_at_spill, r.rejected);
  }
  std::printf("\nTimes in ms. geogate (defaults) decisions by why:");
  for (const auto& [k, v] : why)
    std::printf(" %s=%zu", k.c_str(), v);
  std::printf("\n");
  return 0;
}
