// Reloads as part of generated sequences (DESIGN.md §8, "Snapshot per
// request"): a model of workers, their delayed reload notifications and
// their connections' request heads. Every request is decided under the
// runtime published last before its head was complete, and its allowed set
// is the one the newest policy gives, whatever order notifications arrive in.
#include <catch2/catch.hpp>

#include <deque>
#include <random>
#include <thread>

#include "config/loader.h"
#include "proxy/runtime.h"
#include "proxy/runtime_slot.h"
#include "routing/residency.h"

using namespace geogate;
using proxy::LocalRuntime;
using proxy::Runtime;
using proxy::RuntimeConstPtr;
using proxy::RuntimeSlot;

namespace {

constexpr int kRegions = 4;

// Every client here is unplaced, so geo.unknown's rule "gov" governs it:
// its allowed regions are exactly `allow` (bit i = region r<i>).
config::SnapshotConstPtr Policy(unsigned allow) {
  std::string text = R"([gateway]
edge = "e"
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
unknown = "gov"
)";
  std::string names;
  for (int i = 0; i < kRegions; ++i) {
    text += "[[regions]]\nname = \"r" + std::to_string(i) +
            "\"\njurisdiction = \"EU\"\nlocation = { lat = 1.0, lon = 1.0 }\n";
    text += "[[backends]]\nname = \"b" + std::to_string(i) + "\"\nregion = \"r" +
            std::to_string(i) + "\"\nurl = \"http://127.0.0.1:" + std::to_string(1000 + i) +
            "\"\nmodels = [\"m\"]\n";
    if (allow & (1u << i)) names += (names.empty() ? "\"r" : ", \"r") + std::to_string(i) + "\"";
  }
  text += "[[residency]]\nname = \"gov\"\nallow_regions = [" + names + "]\n";
  auto r = config::LoadString(text, "gen.toml", "/tmp",
                              [](const std::string&) { return std::optional<std::string>(); });
  INFO(text);
  INFO((r.errors.empty() ? std::string() : r.errors.front().ToString()));
  REQUIRE(r.ok());
  return r.snapshot;
}

RuntimeConstPtr MakeRuntime(config::SnapshotConstPtr snap, uint64_t generation) {
  auto rt = std::make_shared<Runtime>();
  rt->config = std::move(snap);
  rt->generation = generation;
  return rt;
}

unsigned AllowedBits(const config::Snapshot& snap) {
  routing::ResidencyDecision d = routing::DecideResidency(snap, routing::GeoInfo{}, nullptr, {});
  unsigned bits = 0;
  for (int i = 0; i < kRegions; ++i)
    if (d.allowed.contains(static_cast<size_t>(i))) bits |= 1u << i;
  return bits;
}

}  // namespace

TEST_CASE("every head completed after a publish is decided under it, notified or not",
          "[reload][property]") {
  // Policies are loaded once: the sequences pick among them.
  std::vector<config::SnapshotConstPtr> policies;
  for (unsigned allow = 1; allow < (1u << kRegions); ++allow)
    policies.push_back(Policy(allow));

  std::mt19937_64 rng(20261201);
  size_t heads = 0, stale_worker_heads = 0, stale_posts = 0, reloads = 0;
  for (int seq = 0; seq < 300; ++seq) {
    RuntimeSlot slot;
    const size_t workers = 1 + rng() % 3;
    std::vector<LocalRuntime> local;
    std::vector<std::deque<RuntimeConstPtr>> posted(workers);  // notifications not yet run
    local.reserve(workers);
    uint64_t generation = 1;
    size_t current_policy = rng() % policies.size();
    RuntimeConstPtr first = MakeRuntime(policies[current_policy], generation);
    slot.Publish(first);
    for (size_t w = 0; w < workers; ++w) {
      local.emplace_back(slot);
      REQUIRE(local[w].Adopt(first));
    }
    std::vector<uint64_t> last_seen(workers, generation);
    for (int step = 0; step < 200; ++step) {
      const uint64_t what = rng() % 10;
      if (what < 2) {
        // A reload: published at once, each worker told later.
        current_policy = rng() % policies.size();
        RuntimeConstPtr rt = MakeRuntime(policies[current_policy], ++generation);
        slot.Publish(rt);
        for (auto& q : posted)
          q.push_back(rt);
        ++reloads;
      } else if (what < 5) {
        // A worker runs a notification (each worker's arrive in order).
        size_t w = rng() % workers;
        if (posted[w].empty()) continue;
        RuntimeConstPtr rt = std::move(posted[w].front());
        posted[w].pop_front();
        const bool older = rt->generation <= local[w].generation();
        CHECK(local[w].Adopt(rt) == !older);
        stale_posts += older;
      } else {
        // A request's head is complete on some worker's connection.
        size_t w = rng() % workers;
        stale_worker_heads += local[w].generation() != generation;
        local[w].Refresh();
        const proxy::PinnedRuntime& pinned = local[w].held();
        REQUIRE(pinned);
        const Runtime& rt = **pinned;
        REQUIRE(rt.generation == generation);
        REQUIRE(rt.config.get() == policies[current_policy].get());
        REQUIRE(AllowedBits(*rt.config) == current_policy + 1);
        ++heads;
      }
      for (size_t w = 0; w < workers; ++w) {
        // A worker's generation never goes back.
        REQUIRE(local[w].generation() >= last_seen[w]);
        last_seen[w] = local[w].generation();
      }
    }
  }
  INFO("heads " << heads << ", on a not-yet-notified worker " << stale_worker_heads
                << ", stale notifications " << stale_posts << ", reloads " << reloads);
  // The sequences must exercise the case that leaked before: a head on a
  // worker whose notification has not run yet, and late notifications.
  CHECK(heads > 20000);
  CHECK(stale_worker_heads > 1000);
  CHECK(stale_posts > 1000);
}

TEST_CASE("a worker that saw a generation holds a runtime at least that new", "[reload]") {
  RuntimeSlot slot;
  auto snap = Policy(1);
  slot.Publish(MakeRuntime(snap, 1));
  constexpr uint64_t kLast = 2000;
  std::thread publisher([&] {
    for (uint64_t g = 2; g <= kLast; ++g)
      slot.Publish(MakeRuntime(snap, g));
  });
  LocalRuntime local(slot);
  uint64_t previous = 0;
  while (local.generation() < kLast) {
    const uint64_t seen = slot.generation();
    local.Refresh();
    REQUIRE(local.held());
    REQUIRE((*local.held())->generation == local.generation());
    REQUIRE(local.generation() >= seen);
    REQUIRE(local.generation() >= previous);
    previous = local.generation();
  }
  publisher.join();
  CHECK(local.generation() == kLast);
}
