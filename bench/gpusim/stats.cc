#include "bench/gpusim/stats.h"

namespace gpusim {
namespace {

// Bound the keyed maps: a scan with random paths or forged X-Forwarded-For
// values must not grow the simulator without limit.
constexpr size_t kMaxKeys = 10000;

}  // namespace

void StatsShard::bump_key(Counts& counts, std::string_view key) {
  auto it = counts.find(key);
  if (it != counts.end()) {
    ++it->second;
    return;
  }
  if (counts.size() >= kMaxKeys) key = "(other)";
  ++counts[std::string(key)];
}

void StatsShard::count_request(std::string_view path, std::string_view client) {
  std::lock_guard lock(mu_);
  bump_key(by_path_, path);
  if (!client.empty()) bump_key(by_client_, client);
}

void StatsShard::count_model(std::string_view model) {
  std::lock_guard lock(mu_);
  bump_key(by_model_, model);
}

Stats::Stats(size_t shards) {
  shards_.reserve(shards);
  for (size_t i = 0; i < shards; ++i)
    shards_.push_back(std::make_unique<StatsShard>());
}

uint64_t Stats::sum(std::atomic<uint64_t> StatsShard::*field) const {
  uint64_t total = 0;
  for (const auto& s : shards_)
    total += ((*s).*field).load(std::memory_order_relaxed);
  return total;
}

boost::json::object Stats::snapshot() const {
  boost::json::object out;
  out["requests_total"] = sum(&StatsShard::requests_total);
  out["health_checks"] = sum(&StatsShard::health_checks);
  out["streams_started"] = sum(&StatsShard::streams_started);
  out["streams_completed"] = sum(&StatsShard::streams_completed);
  out["streams_cancelled"] = sum(&StatsShard::streams_cancelled);
  out["streams_aborted"] = sum(&StatsShard::streams_aborted);
  out["tokens_generated"] = sum(&StatsShard::tokens_generated);
  out["prompt_tokens"] = sum(&StatsShard::prompt_tokens);
  StatsShard::Counts by_path, by_client, by_model;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mu_);
    for (const auto& [k, v] : s->by_path_)
      by_path[k] += v;
    for (const auto& [k, v] : s->by_client_)
      by_client[k] += v;
    for (const auto& [k, v] : s->by_model_)
      by_model[k] += v;
  }
  auto to_json = [](const StatsShard::Counts& counts) {
    boost::json::object o;
    for (const auto& [k, v] : counts)
      o[k] = v;
    return o;
  };
  out["requests_by_path"] = to_json(by_path);
  out["by_client"] = to_json(by_client);
  out["by_model"] = to_json(by_model);
  return out;
}

void Stats::reset() {
  for (const auto& s : shards_) {
    for (auto field : {&StatsShard::requests_total, &StatsShard::health_checks,
                       &StatsShard::streams_started, &StatsShard::streams_completed,
                       &StatsShard::streams_cancelled, &StatsShard::streams_aborted,
                       &StatsShard::tokens_generated, &StatsShard::prompt_tokens}) {
      ((*s).*field).store(0, std::memory_order_relaxed);
    }
    std::lock_guard lock(s->mu_);
    s->by_path_.clear();
    s->by_client_.clear();
    s->by_model_.clear();
  }
}

}  // namespace gpusim
