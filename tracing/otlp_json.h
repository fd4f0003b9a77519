// Spans as an OTLP/HTTP JSON body: the protobuf JSON mapping of
// ExportTraceServiceRequest (resourceSpans / scopeSpans / spans), ids in
// lower-case hex, times and 64-bit integers as decimal strings.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "tracing/span.h"

namespace geogate::tracing {

struct ResourceInfo {
  std::string service_name = "geogate";
  std::string service_version;   // empty: not sent
  std::string service_instance;  // service.instance.id, e.g. the edge; empty: not sent
};

std::string EncodeExportRequest(const ResourceInfo& resource, std::span<const Span> spans);

}  // namespace geogate::tracing
