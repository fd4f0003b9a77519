#include <catch2/catch.hpp>

#include "config/loader.h"
#include "health/health_table.h"

using namespace geogate;

namespace {

std::string Config(const std::string& backends) {
  return R"([gateway]
edge = "e"
[[gateway.listeners]]
address = "127.0.0.1:0"
[[regions]]
name = "r1"
jurisdiction = "EU"
location = { lat = 1.0, lon = 1.0 }
)" + backends;
}

std::string Backend(const std::string& name, int port, int capacity = 64) {
  return "[[backends]]\nname = \"" + name +
         "\"\nregion = \"r1\"\nurl = \"http://127.0.0.1:" + std::to_string(port) +
         "\"\nmodels = [\"m\"]\ncapacity = " + std::to_string(capacity) + "\n";
}

config::SnapshotConstPtr Load(const std::string& text) {
  auto r = config::LoadString(text, "t.toml", "/tmp",
                              [](const std::string&) { return std::optional<std::string>(); });
  INFO((r.errors.empty() ? "" : r.errors[0].ToString()));
  REQUIRE(r.ok());
  return r.snapshot;
}

}  // namespace

TEST_CASE("reload diff: added, removed, replaced (url), updated, unchanged", "[reload]") {
  auto before = Load(
      Config(Backend("keep", 1) + Backend("tune", 2) + Backend("move", 3) + Backend("gone", 4)));
  auto after = Load(
      Config(Backend("keep", 1) + Backend("tune", 2, 8) + Backend("move", 33) + Backend("new", 5)));
  config::BackendChanges d = config::DiffBackends(*before, *after);
  CHECK(d.added == std::vector<std::string>{"new"});
  CHECK(d.removed == std::vector<std::string>{"gone"});
  CHECK(d.replaced == std::vector<std::string>{"move"});
  CHECK(d.updated == std::vector<std::string>{"tune"});
  CHECK(d.unchanged == 1);
  CHECK(d.Summary() ==
        "1 added (new), 1 removed (gone), 1 replaced (move), 1 updated (tune), 1 unchanged");
  CHECK(config::DiffBackends(*before, *before).empty());
}

TEST_CASE("reload carry-over: state survives for unchanged identities only", "[reload]") {
  health::HealthTable table;
  auto before = Load(
      Config(Backend("keep", 1) + Backend("tune", 2) + Backend("move", 3) + Backend("gone", 4)));
  auto s1 = table.Bind(*before);
  for (auto& s : s1) {
    s->state = health::HealthState::kHealthy;
    s->inflight = 2;
    s->ttft_ewma_us = 40000;
  }
  std::weak_ptr<health::BackendState> gone = s1[3];
  auto after = Load(
      Config(Backend("keep", 1) + Backend("tune", 2, 8) + Backend("move", 33) + Backend("new", 5)));
  auto s2 = table.Bind(*after);
  CHECK(s2[0] == s1[0]);  // unchanged
  CHECK(s2[1] == s1[1]);  // settings changed: health, EWMAs, in-flight carry over
  CHECK(s2[1]->inflight == 2);
  CHECK(s2[1]->ttft_ewma_us == 40000);
  CHECK(s2[2] != s1[2]);  // URL changed: a new backend with fresh health
  CHECK(s2[2]->state == health::HealthState::kUnknown);
  CHECK(s2[3]->state == health::HealthState::kUnknown);  // added: no traffic before a probe
  // The removed backend's state lives while requests that pinned it run...
  CHECK_FALSE(gone.expired());
  CHECK(table.Find(before->backends[3].state_key()) == nullptr);
  s1.clear();
  // ...and is released with the last of them.
  CHECK(gone.expired());
}

TEST_CASE("a pinned snapshot outlives the publication of a newer one", "[reload]") {
  auto v1 = Load(Config(Backend("a", 1)));
  std::atomic<std::shared_ptr<const config::Snapshot>> published{v1};
  std::shared_ptr<const config::Snapshot> pinned = published.load();  // a request starts
  std::weak_ptr<const config::Snapshot> weak = v1;
  v1.reset();
  published.store(Load(Config(Backend("b", 2))));  // a reload
  CHECK(pinned->backends[0].name == "a");          // the request still sees its policy
  CHECK(published.load()->backends[0].name == "b");
  pinned.reset();  // the request ends
  CHECK(weak.expired());
}
