#include "proxy/headers.h"

#include <array>
#include <charconv>
#include <cstring>
#include <iterator>
#include <random>
#include <type_traits>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/url/grammar/charset.hpp>
#include <boost/url/grammar/digit_chars.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

#include "common/splitmix64.h"
#include "proxy/response_head.h"

namespace geogate::proxy {

namespace beast = boost::beast;

namespace {

bool IsGatewayHeader(std::string_view name) {
  return name.size() >= 10 && beast::iequals(name.substr(0, 10), "x-geogate-");
}

// A Host of RFC 3986 unreserved characters (a reg-name or an IPv4 address)
// and an optional ":" port of digits: an authority without userinfo, which
// is what the parse below accepts, known for a pass over the bytes instead of
// Boost.URL's grammar (about 1,700 instructions per request).
bool IsPlainHost(std::string_view host) {
  const char* end = host.data() + host.size();
  const char* p =
      boost::urls::grammar::find_if_not(host.data(), end, boost::urls::unreserved_chars);
  if (p == end) return true;
  if (*p != ':') return false;
  return boost::urls::grammar::find_if_not(p + 1, end, boost::urls::grammar::digit_chars) == end;
}

}  // namespace

bool NamedInConnection(std::string_view name, std::string_view connection_value) {
  if (connection_value.empty()) return false;
  for (auto token : http::token_list(connection_value))
    if (beast::iequals(token, name)) return true;
  return false;
}

std::string_view ContentCodingOf(std::string_view content_encoding_value) {
  for (auto coding : http::token_list(content_encoding_value))
    if (!beast::iequals(coding, "identity")) return {coding.data(), coding.size()};
  return {};
}

bool IsHopByHopField(http::field f) {
  switch (f) {
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_connection:
    case http::field::te:
    case http::field::trailer:
    case http::field::transfer_encoding:
    case http::field::upgrade:
    case http::field::proxy_authenticate:
    case http::field::proxy_authorization:
      return true;
    default:
      return false;
  }
}

bool IsHopByHop(std::string_view name, std::string_view connection_value) {
  return IsHopByHopField(http::string_to_field(name)) || NamedInConnection(name, connection_value);
}

std::optional<HeadRefusal> CheckRequestHead(const Fields& fields, unsigned version) {
  // One lookup per rule: the fields are kept ordered by name, so a count is
  // a tree search, and an ordinary request passes with three of them.
  size_t hosts = fields.count(http::field::host);
  if (hosts > 1)
    return HeadRefusal{ErrorKind::kBadRequest, "more than one Host header (RFC 9112 section 3.2)"};
  if (hosts == 0) {
    if (version >= 11)
      return HeadRefusal{ErrorKind::kBadRequest,
                         "HTTP/1.1 request without a Host header (RFC 9112 section 3.2)"};
  } else {
    // Host = uri-host [ ":" port ] (RFC 9110 7.2): an authority without
    // userinfo. Empty is valid (a target with no authority).
    std::string_view host = fields[http::field::host];
    if (!IsPlainHost(host)) {
      auto authority = boost::urls::parse_authority(host);
      if (!authority || authority->has_userinfo())
        return HeadRefusal{ErrorKind::kBadRequest, "the Host header is not host[:port]"};
    }
  }
  if (fields.count(http::field::authorization) > 1)
    return HeadRefusal{ErrorKind::kBadRequest, "more than one Authorization header"};
  if (fields.count("x-geogate-residency") > 1)
    return HeadRefusal{ErrorKind::kBadResidencyHeader, "more than one x-geogate-residency header"};
  return std::nullopt;
}

template <class Out>
void PrepareUpstreamHeaders(const Fields& in, Out& out, const ForwardInfo& fwd) {
  // Every Connection field names fields to drop (RFC 9110 7.6.1: a list,
  // which a client may send as several fields), not only the first.
  std::string_view connection;
  thread_local std::string joined;  // reused, as xff below
  auto [first, end] = in.equal_range(http::field::connection);
  if (first != end) {
    connection = first->value();
    if (std::next(first) != end) {
      joined.clear();
      for (auto it = first; it != end; ++it)
        joined.append(it->value()).append(",");
      connection = joined;
    }
  }
  // Per thread and reused: a fresh string here was a heap allocation for
  // every proxied request (the peer address alone outgrows SSO once a
  // client's own X-Forwarded-For is joined to it).
  thread_local std::string xff;
  xff.clear();
  for (const auto& f : in) {
    std::string_view name = f.name_string();
    switch (f.name()) {
      case http::field::authorization:
      case http::field::host:
      case http::field::content_length:
      case http::field::expect:
      case http::field::accept_encoding:  // set below
        continue;
      default:
        break;
    }
    if (beast::iequals(name, "x-forwarded-for")) {  // re-added below, with the peer appended
      if (!xff.empty()) xff += ", ";
      xff += f.value();
      continue;
    }
    if (IsHopByHopField(f.name()) || NamedInConnection(name, connection) || IsGatewayHeader(name))
      continue;
    if (beast::iequals(name, "x-forwarded-proto") || beast::iequals(name, "x-request-id")) continue;
    if (fwd.replace_trace_context &&
        (beast::iequals(name, "traceparent") || beast::iequals(name, "tracestate")))
      continue;
    out.insert(name, f.value());
  }
  if (!fwd.peer_ip.empty()) {
    if (!xff.empty()) xff += ", ";
    xff += fwd.peer_ip;
  }
  if (!xff.empty()) out.set("x-forwarded-for", xff);
  out.set("x-forwarded-proto", fwd.client_tls ? "https" : "http");
  if (!fwd.request_id.empty()) out.set("x-request-id", fwd.request_id);
  // The gateway reads every answer (usage, SSE event boundaries, the usage
  // chunk it removes): it asks for it unencoded, whatever the client
  // accepts. Leaving the field out would accept any coding (RFC 9110
  // 12.5.3); providers behind a CDN compress for an SDK's "gzip, br".
  out.set(http::field::accept_encoding, "identity");
}

template <class Out>
void SetBackendHeaders(Out& out, const config::Backend& backend) {
  bool default_port = (backend.tls && backend.port == 443) || (!backend.tls && backend.port == 80);
  bool v6 = backend.host.find(':') != std::string::npos;
  thread_local std::string host;  // reused, as xff above
  host.clear();
  if (v6) host += '[';
  host += backend.host;
  if (v6) host += ']';
  if (!default_port) {
    host += ':';
    char port[8];
    host.append(port, std::to_chars(port, port + sizeof port, backend.port).ptr);
  }
  out.set(http::field::host, host);
  if (!backend.api_key.empty())
    out.set(http::field::authorization, "Bearer " + backend.api_key);
  else if constexpr (std::is_same_v<Out, http::fields>)
    out.erase(http::field::authorization);  // fields are reused across attempts
}

bool ForwardsResponseField(http::field f, std::string_view name) {
  if (f == http::field::content_length || IsHopByHopField(f)) return false;
  if (IsGatewayHeader(name) || beast::iequals(name, "x-request-id")) return false;
  // The listener's CORS policy is the gateway's (proxy/cors.h): a
  // backend's own (vLLM allows every origin by default) never reaches a
  // browser.
  return !(name.size() > 15 && beast::iequals(name.substr(0, 15), "access-control-"));
}

void AddResponseTags(ResponseHead& out, const ResponseTags& tags) {
  if (!tags.edge.empty()) out.set("x-geogate-edge", tags.edge);
  if (!tags.region.empty()) out.set("x-geogate-region", tags.region);
  if (!tags.backend.empty()) out.set("x-geogate-backend", tags.backend);
  if (!tags.residency_rule.empty()) out.set("x-geogate-residency-rule", tags.residency_rule);
  if (!tags.request_id.empty()) out.set("x-request-id", tags.request_id);
}

template void PrepareUpstreamHeaders(const Fields&, http::fields&, const ForwardInfo&);
template void PrepareUpstreamHeaders(const Fields&, HeaderText&, const ForwardInfo&);
template void SetBackendHeaders(http::fields&, const config::Backend&);
template void SetBackendHeaders(HeaderText&, const config::Backend&);

namespace {

// The two hex digits of every byte value: an id is written a byte (two
// characters) a step. A digit a step cost about 250 instructions a
// request; abseil's AlphaNum(Hex(v, kZeroPad16)) twice, 190 (callgrind,
// bench/ab post). This is the request path's only hex writer; the cold
// ones (config hash, trace ids, JSON escapes) use abseil's.
constexpr std::array<std::array<char, 2>, 256> kHexPairs = [] {
  constexpr char kHex[] = "0123456789abcdef";
  std::array<std::array<char, 2>, 256> t{};
  for (size_t i = 0; i < 256; ++i)
    t[i] = {kHex[i >> 4], kHex[i & 0xF]};
  return t;
}();

}  // namespace

GeneratedRequestId NewRequestId() {
  // Unique, not secret: each thread's own splitmix64 stream from a random
  // seed (a bijection of a counter, so a thread never repeats an id).
  thread_local uint64_t state = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  GeneratedRequestId id;
  for (size_t half = 0; half < 2; ++half) {
    const uint64_t word = SplitMix64(state);
    for (size_t i = 0; i < 8; ++i)
      std::memcpy(&id[half * 16 + i * 2], kHexPairs[(word >> (i * 8)) & 0xFF].data(), 2);
  }
  return id;
}

bool IsAcceptableRequestId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id)
    if (c <= 0x20 || c >= 0x7F || c == '"' || c == '\\') return false;
  return true;
}

}  // namespace geogate::proxy
