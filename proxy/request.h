// The request as a session parses and keeps it. Apart from session.h, which
// needs the transport, so that transport-neutral code (the client-request
// fuzz target) parses with the very same types.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>

#include "common/block_cache.h"
#include "proxy/growing_string_body.h"
#include "proxy/headers.h"

namespace geogate::proxy {

// The request body in the worker's block cache like its fields: a typical
// chat request's body (under 512 bytes) costs no malloc. It grows with the
// bytes that arrive instead of reserving the announced Content-Length.
using RequestBodyText = GrowingStringBody<common::PooledAllocator<char>>;
using Request = http::request<RequestBodyText, Fields>;
using RequestParser = http::request_parser<RequestBodyText, common::PooledAllocator<char>>;

}  // namespace geogate::proxy
