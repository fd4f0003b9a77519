// Header handling between client and backend (RFC 9110 §7.6.1): hop-by-hop
// fields never cross the proxy, the client's credentials never reach a
// backend, X-Forwarded-For/-Proto are appended, and x-request-id is kept or
// generated.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/fields.hpp>

#include "common/block_cache.h"
#include "config/snapshot.h"
#include "proxy/header_line.h"
#include "proxy/openai_error.h"

namespace geogate::proxy {

namespace http = boost::beast::http;

class ResponseHead;

/// The fields of the heads the proxy parses (the client's request, the
/// backend's response), in per-thread pooled blocks.
using Fields = http::basic_fields<common::PooledAllocator<char>>;

/// True for fields that describe one connection rather than the message:
/// Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding,
/// Upgrade, Proxy-Authenticate/-Authorization, and any field named in the
/// message's Connection header (`connection_value`).
bool IsHopByHop(std::string_view name, std::string_view connection_value);
/// The fixed part of that list, by Beast's code for the field's name.
bool IsHopByHopField(http::field f);
/// Whether `connection_value` (a Connection field's) names `name`.
bool NamedInConnection(std::string_view name, std::string_view connection_value);
/// The first content coding other than identity that a Content-Encoding
/// field's value names (gzip, br), or empty: a body the gateway cannot read.
std::string_view ContentCodingOf(std::string_view content_encoding_value);

/// Why a client's request head is refused before it is handled.
struct HeadRefusal {
  ErrorKind kind;
  std::string_view message;  // a literal
};

/// The header rules checked once per request, before anything reads a
/// field: RFC 9112 3.2 (an HTTP/1.1 request has exactly one Host, any
/// request at most one, and its value is host[:port]), and at most one
/// Authorization and one x-geogate-residency, whose first copy would
/// otherwise win silently (bad_residency_header for the latter).
/// `version` is Beast's (11 = HTTP/1.1). @return nullopt when acceptable.
std::optional<HeadRefusal> CheckRequestHead(const Fields& fields, unsigned version);

/// Appends fields to a serialised head as "Name: value\r\n": how the proxy
/// builds the heads it sends, without a Beast fields container (one
/// allocation per field) and its serializer. set() appends too: the
/// functions below drop from their input every field they set, so no field
/// is added twice.
class HeaderText {
 public:
  explicit HeaderText(common::PooledString& out) : out_(out) {}
  void insert(std::string_view name, std::string_view value) {
    AppendHeaderLine(out_, name, value);
  }
  void set(std::string_view name, std::string_view value) { insert(name, value); }
  void set(http::field f, std::string_view value) { insert(http::to_string(f), value); }

 private:
  common::PooledString& out_;
};

struct ForwardInfo {
  std::string_view peer_ip;     // appended to X-Forwarded-For
  bool client_tls = false;      // X-Forwarded-Proto https/http
  std::string_view request_id;  // x-request-id sent upstream
  // The gateway traces the request: the client's traceparent/tracestate
  // are replaced by the gateway's own (trace_hooks.h), never forwarded.
  bool replace_trace_context = false;
};

/// Fills `out` with the client's end-to-end request headers for a backend:
/// drops hop-by-hop fields, Authorization (the client's key is never
/// forwarded), Host, Content-Length, Expect and the gateway's own
/// x-geogate-* request headers; appends X-Forwarded-For, sets
/// X-Forwarded-Proto and x-request-id.
/// `Out` is http::fields or HeaderText.
template <class Out>
void PrepareUpstreamHeaders(const Fields& in, Out& out, const ForwardInfo& fwd);

/// The per-attempt part: Host for this backend and its own API key, if any.
template <class Out>
void SetBackendHeaders(Out& out, const config::Backend& backend);

struct ResponseTags {
  std::string_view edge;
  std::string_view region;
  std::string_view backend;
  std::string_view request_id;
  std::string_view residency_rule;  // empty = do not send the header
};

/// Whether a backend's response field `name` (Beast's code for it, and
/// its spelling) reaches the client. Not: the hop-by-hop fields (as
/// IsHopByHop, except those a Connection field names, which the caller
/// drops), Content-Length (the gateway frames the body itself), the
/// gateway's own x-geogate-* and x-request-id (set from ResponseTags), and
/// Access-Control-* (CORS is the listener's, proxy/cors.h).
bool ForwardsResponseField(http::field f, std::string_view name);

/// Adds x-geogate-edge/-region/-backend, x-geogate-residency-rule (when
/// given) and x-request-id to the client's response head.
void AddResponseTags(ResponseHead& out, const ResponseTags& tags);

/// A request id that is unique enough for logs: 32 hex characters from a
/// per-thread generator seeded from the OS (by value, no heap: it is made
/// for every request that comes without one).
using GeneratedRequestId = std::array<char, 32>;
GeneratedRequestId NewRequestId();

/// Client-supplied x-request-id is kept when it is short and printable.
bool IsAcceptableRequestId(std::string_view id);

}  // namespace geogate::proxy
