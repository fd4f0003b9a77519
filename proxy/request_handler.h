// The request phases in order (STYLE.md §12): on_request (target, body
// facts, authentication, tenant limits) -> resolve_geo (client IP, geo,
// residency) -> select_upstream and the upstream relay (proxy.h) -> log.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "proxy/session.h"

namespace geogate::proxy {

/// Handles one complete request. @return whether the connection stays open.
net::awaitable<bool> HandleRequest(Session& session, const PinnedRuntime& pinned, Request& req);

}  // namespace geogate::proxy
