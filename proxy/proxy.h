// select_upstream and the relay (DESIGN.md §4 steps 6-9): pick the attempt
// plan from the residency-allowed set, forward over pooled keep-alive
// connections, hold the response head until the first body bytes so a
// backend that dies before its first token is retried invisibly, then stream
// chunk by chunk with back-pressure both ways.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "common/block_cache.h"
#include "proxy/request_body.h"
#include "proxy/request_context.h"

namespace geogate::proxy {

/// Proxies the request of `ctx`, whose body `body` is (parsed; its block is
/// freed once the request to the backend is made).
/// @return whether the client connection stays open.
net::awaitable<bool> ProxyRequest(RequestContext& ctx, common::PooledPtr<RequestBody> body);

}  // namespace geogate::proxy
