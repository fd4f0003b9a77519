#include "accounting/capacity_export.h"

#include <optional>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "common/json.h"

namespace geogate::accounting {
namespace {

namespace json = boost::json;

json::value OrNull(const std::optional<double>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

}  // namespace

std::string CapacityJson(const CapacityReport& r) {
  json::array pools;
  for (const PoolReport& p : r.pools) {
    json::object utilization;
    for (size_t w = 0; w < kUtilWindows; ++w)
      utilization.emplace(UtilWindowName(static_cast<UtilWindow>(w)), OrNull(p.utilization[w]));
    pools.emplace_back(json::object{{"region", p.region},
                                    {"gpu", p.gpu},
                                    {"model", p.model},
                                    {"backends", p.routable_backends},
                                    {"configured_backends", p.configured_backends},
                                    {"capacity_per_backend", p.capacity_per_backend},
                                    {"utilization", std::move(utilization)},
                                    {"mean_inflight_5m", OrNull(p.mean_inflight_5m)},
                                    {"desired_backends", p.desired_backends},
                                    {"reason", p.reason}});
  }
  json::array reserved_idle;
  for (const ReservedIdle& g : r.reserved_idle) {
    json::array backends;
    for (const ReservedIdleBackend& b : g.backends)
      backends.emplace_back(json::object{{"name", b.name},
                                         {"utilization_5m", b.utilization_5m},
                                         {"idle_share", b.idle_share},
                                         {"dollars_per_hour", b.dollars_per_hour}});
    reserved_idle.emplace_back(json::object{{"region", g.region},
                                            {"gpu", g.gpu},
                                            {"dollars_per_hour", g.dollars_per_hour},
                                            {"backends", std::move(backends)}});
  }
  return common::SerializeJson(json::object{{"target_utilization", r.target_utilization},
                                            {"pools", std::move(pools)},
                                            {"reserved_idle", std::move(reserved_idle)}});
}

void WriteCapacityMetrics(observability::PromWriter& w, const CapacityReport& r) {
  w.Family("geogate_pool_utilization", "gauge",
           "In-flight / routable capacity of a pool (region, GPU type, model), time-weighted over "
           "the window.");
  for (const PoolReport& p : r.pools) {
    for (size_t i = 0; i < kUtilWindows; ++i) {
      if (!p.utilization[i]) continue;
      w.Sample("geogate_pool_utilization",
               {{"region", p.region},
                {"gpu", p.gpu},
                {"model", p.model},
                {"window", UtilWindowName(static_cast<UtilWindow>(i))}},
               *p.utilization[i]);
    }
  }
  w.Family("geogate_pool_desired_backends", "gauge",
           "Backends that would bring the pool's 5-minute utilization to the target.");
  for (const PoolReport& p : r.pools) {
    w.Sample("geogate_pool_desired_backends",
             {{"region", p.region}, {"gpu", p.gpu}, {"model", p.model}}, p.desired_backends);
  }
  w.Family("geogate_pool_backends", "gauge", "Routable backends in the pool now.");
  for (const PoolReport& p : r.pools) {
    w.Sample("geogate_pool_backends", {{"region", p.region}, {"gpu", p.gpu}, {"model", p.model}},
             p.routable_backends);
  }
  w.Family("geogate_reserved_idle_cost_dollars_per_hour", "gauge",
           "Reserved capacity left idle (below target) while on-demand or spot backends of the "
           "same pool carried load, priced at the reserved backends' cost_per_hour.");
  for (const ReservedIdle& g : r.reserved_idle) {
    w.Sample("geogate_reserved_idle_cost_dollars_per_hour", {{"region", g.region}, {"gpu", g.gpu}},
             g.dollars_per_hour);
  }
}

}  // namespace geogate::accounting
