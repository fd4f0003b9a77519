// How geogate's coroutines (the data plane, admin, health probes, OTLP
// export) await an Asio operation: `co_await op(..., common::kAwait)` gives the operation's
// results as a tuple, (error_code, ...), and never throws.
//
// The token is as_tuple(deferred), not as_tuple(use_awaitable). With
// use_awaitable, Asio 1.81 runs every operation's initiation in a coroutine
// of its own: one coroutine frame allocated, resumed and freed per
// operation. A deferred operation is awaited directly (Asio's awaitable
// frame takes any async operation: impl/awaitable.hpp, await_transform), so
// the operation costs its handler's state only. Both are Asio's public
// interface. What it saves is in bench/RESULTS.md ("Operations awaited
// without a frame"); tests/unit/common/coroutine_frames_test.cc checks that
// no frame is allocated.
//
// An operation written for one stream type may dispatch to several (plain,
// TLS, the tests' in-memory stream): each branch's deferred operation is a
// type of its own, so such a dispatch initiates once with
// net::async_initiate and hands the handler on (proxy/stream.h).
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace geogate::common {

inline constexpr auto kAwait = boost::asio::as_tuple(boost::asio::deferred);

/// The same results through a coroutine frame of the operation's own, for
/// the operations whose declaration needs the token's
/// async_result::return_type, which deferred does not have: in Beast 1.81,
/// ssl_stream's handshake and shutdown and basic_stream's connect to a
/// list of endpoints (once per connection).
inline constexpr auto kAwaitInFrame = boost::asio::as_tuple(boost::asio::use_awaitable);

}  // namespace geogate::common
