#include "accounting/capacity_export.h"

#include "accounting/showback_line.h"
#include "common/json_text.h"

namespace geogate::gateway {
namespace {

void Key(std::string& out, std::string_view name) {
  AppendJsonString(out, name);
  out += ':';
}

void StringField(std::string& out, std::string_view name, std::string_view value) {
  Key(out, name);
  AppendJsonString(out, value);
}

void NumberField(std::string& out, std::string_view name, double value) {
  Key(out, name);
  AppendNumber(out, value);
}

}  // namespace

std::string CapacityJson(const CapacityReport& r) {
  std::string out = "{";
  NumberField(out, "target_utilization", r.target_utilization);
  out += ",\"pools\":[";
  for (size_t i = 0; i < r.pools.size(); ++i) {
    const PoolReport& p = r.pools[i];
    if (i > 0) out += ',';
    out += '{';
    StringField(out, "region", p.region);
    out += ',';
    StringField(out, "gpu", p.gpu);
    out += ',';
    StringField(out, "model", p.model);
    out += ',';
    NumberField(out, "backends", p.routable_backends);
    out += ',';
    NumberField(out, "configured_backends", p.configured_backends);
    out += ',';
    NumberField(out, "capacity_per_backend", p.capacity_per_backend);
    out += ",\"utilization\":{";
    for (size_t w = 0; w < kUtilWindows; ++w) {
      if (w > 0) out += ',';
      Key(out, UtilWindowName(static_cast<UtilWindow>(w)));
      if (p.utilization[w]) {
        AppendNumber(out, *p.utilization[w]);
      } else {
        out += "null";
      }
    }
    out += "},";
    Key(out, "mean_inflight_5m");
    if (p.mean_inflight_5m) {
      AppendNumber(out, *p.mean_inflight_5m);
    } else {
      out += "null";
    }
    out += ',';
    NumberField(out, "desired_backends", p.desired_backends);
    out += ',';
    StringField(out, "reason", p.reason);
    out += '}';
  }
  out += "],\"reserved_idle\":[";
  for (size_t i = 0; i < r.reserved_idle.size(); ++i) {
    const ReservedIdle& g = r.reserved_idle[i];
    if (i > 0) out += ',';
    out += '{';
    StringField(out, "region", g.region);
    out += ',';
    StringField(out, "gpu", g.gpu);
    out += ',';
    NumberField(out, "dollars_per_hour", g.dollars_per_hour);
    out += ",\"backends\":[";
    for (size_t k = 0; k < g.backends.size(); ++k) {
      const ReservedIdleBackend& b = g.backends[k];
      if (k > 0) out += ',';
      out += '{';
      StringField(out, "name", b.name);
      out += ',';
      NumberField(out, "utilization_5m", b.utilization_5m);
      out += ',';
      NumberField(out, "idle_share", b.idle_share);
      out += ',';
      NumberField(out, "dollars_per_hour", b.dollars_per_hour);
      out += '}';
    }
    out += "]}";
  }
  out += "]}";
  return out;
}

void WriteCapacityMetrics(PromWriter& w, const CapacityReport& r) {
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

}  // namespace geogate::gateway
