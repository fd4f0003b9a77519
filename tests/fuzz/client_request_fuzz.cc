// Fuzzes what a client sends: the request through the session's parser
// (Beast's request parser with the pooled body and fields), the head rules
// (CheckRequestHead), the target's normalisation, the head sent upstream
// (PrepareUpstreamHeaders) and the body's facts and rewrite (RequestBody).
// The first input byte picks where the bytes are split; the rest is the
// request. Checks, besides the sanitizers:
//  - the same bytes split in two parse to the same request as in one piece;
//  - a head CheckRequestHead accepts has at most one Host (exactly one in
//    HTTP/1.1), one Authorization and one x-geogate-residency;
//  - a normalised target starts with '/', begins with its path, and
//    normalises to itself;
//  - every line of the upstream head is "name: value\r\n" with no CR, LF
//    or NUL inside, and never a field the gateway must not forward
//    (hop-by-hop, named in Connection, Authorization, Host, Content-Length,
//    Expect, x-geogate-*);
//  - a body whose facts are read rewrites to a body whose facts are the
//    canonical model, the same stream flag and, for a stream, usage asked.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>

#include "common/block_cache.h"
#include "proxy/headers.h"
#include "proxy/request.h"
#include "proxy/request_body.h"
#include "proxy/request_target.h"
#include "tests/fuzz/fuzz_check.h"

namespace http = boost::beast::http;
using geogate::common::PooledString;
using geogate::proxy::BodyFacts;
using geogate::proxy::CheckRequestHead;
using geogate::proxy::Fields;
using geogate::proxy::ForwardInfo;
using geogate::proxy::HeaderText;
using geogate::proxy::IsHopByHopField;
using geogate::proxy::NamedInConnection;
using geogate::proxy::NormalizeRequestTarget;
using geogate::proxy::PrepareUpstreamHeaders;
using geogate::proxy::RequestBody;
using geogate::proxy::RequestParser;
using geogate::proxy::RequestTarget;

using geogate::fuzz::Check;

namespace {

// What a parse leaves: enough to compare two parses.
struct Parsed {
  bool ok = false;
  std::string method, target, body;
  unsigned version = 0;
  bool keep_alive = false;
  std::vector<std::pair<std::string, std::string>> fields;
};

// Feeds `pieces` one after the other as the session's buffer would get
// them: what Beast leaves unconsumed stays at the front.
Parsed Parse(const std::vector<std::string_view>& pieces, RequestParser& parser) {
  parser.header_limit(8 * 1024);
  parser.body_limit(64 * 1024);
  std::string buffer;
  boost::system::error_code ec;
  for (std::string_view piece : pieces) {
    buffer.append(piece);
    while (!buffer.empty() && !parser.is_done()) {
      size_t used = parser.put(boost::asio::buffer(buffer), ec);
      buffer.erase(0, used);
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec) return {};
      if (used == 0) break;
    }
  }
  if (!parser.is_done()) return {};
  Parsed p;
  p.ok = true;
  const auto& req = parser.get();
  p.method = std::string(req.method_string());
  p.target = std::string(req.target());
  p.version = req.version();
  p.keep_alive = req.keep_alive();
  p.body.assign(req.body().data(), req.body().size());
  for (const auto& f : req.base())
    p.fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
  return p;
}

bool SameParse(const Parsed& a, const Parsed& b) {
  return a.ok == b.ok && a.method == b.method && a.target == b.target && a.version == b.version &&
         a.keep_alive == b.keep_alive && a.body == b.body && a.fields == b.fields;
}

void CheckHeadRules(const Fields& fields, unsigned version) {
  if (CheckRequestHead(fields, version)) return;  // refused: nothing to hold
  size_t hosts = fields.count(http::field::host);
  Check(hosts <= 1 && (version < 11 || hosts == 1));
  Check(fields.count(http::field::authorization) <= 1);
  Check(fields.count("x-geogate-residency") <= 1);
}

void CheckTarget(std::string_view target) {
  std::string storage;
  RequestTarget t = NormalizeRequestTarget(target, storage);
  if (!t.ok) {
    Check(!t.error.empty());
    return;
  }
  Check(!t.target.empty() && t.target.front() == '/');
  Check(t.target.substr(0, t.path.size()) == t.path);
  const std::string first(t.target), first_path(t.path);
  std::string storage2;
  RequestTarget again = NormalizeRequestTarget(first, storage2);
  Check(again.ok && again.target == first && again.path == first_path);
}

bool Forbidden(std::string_view name, std::string_view connection) {
  http::field f = http::string_to_field(name);
  if (IsHopByHopField(f) || NamedInConnection(name, connection)) return true;
  if (f == http::field::authorization || f == http::field::host ||
      f == http::field::content_length || f == http::field::expect)
    return true;
  return name.size() >= 10 && boost::beast::iequals(name.substr(0, 10), "x-geogate-");
}

void CheckUpstreamHead(const Fields& fields) {
  PooledString text;
  HeaderText out(text);
  ForwardInfo fwd;
  fwd.peer_ip = "192.0.2.1";
  fwd.request_id = "fuzz-request";
  PrepareUpstreamHeaders(fields, out, fwd);
  // Every Connection field names fields (RFC 9110 7.6.1), not only the first.
  std::string connection;
  for (auto it = fields.find(http::field::connection);
       it != fields.end() && it->name() == http::field::connection; ++it)
    connection.append(it->value()).append(",");
  std::string_view rest(text.data(), text.size());
  while (!rest.empty()) {
    size_t end = rest.find("\r\n");
    Check(end != std::string_view::npos);
    std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end + 2);
    Check(line.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos);
    size_t colon = line.find(": ");
    Check(colon != std::string_view::npos && colon > 0);
    std::string_view name = line.substr(0, colon);
    // The gateway's own fields are set, not forwarded: x-forwarded-for,
    // x-forwarded-proto and x-request-id may come from it.
    Check(!Forbidden(name, connection));
  }
}

void CheckBody(std::string_view body) {
  RequestBody parsed = RequestBody::Parse(body);
  const BodyFacts& facts = parsed.facts();
  if (facts.status != BodyFacts::Status::kOk) return;
  constexpr std::string_view kCanonical = "canonical-model";
  std::optional<PooledString> rewritten = parsed.Rewrite(kCanonical, /*request_usage=*/true);
  if (!rewritten) {
    // Unchanged: it already says all the rewrite would.
    Check(facts.model == kCanonical && (!facts.stream || facts.include_usage));
    return;
  }
  std::string_view out(rewritten->data(), rewritten->size());
  RequestBody again = RequestBody::Parse(out);
  const BodyFacts& after = again.facts();
  Check(after.status == BodyFacts::Status::kOk);
  Check(after.model == kCanonical);
  Check(after.stream == facts.stream);
  Check(!facts.stream || after.include_usage);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t split_at = data[0];
  std::string_view request(reinterpret_cast<const char*>(data + 1), size - 1);

  RequestParser whole_parser;
  Parsed whole = Parse({request}, whole_parser);
  const size_t cut = request.empty() ? 0 : split_at % (request.size() + 1);
  RequestParser split_parser;
  Parsed split = Parse({request.substr(0, cut), request.substr(cut)}, split_parser);
  Check(SameParse(whole, split));
  if (!whole.ok) return 0;

  const auto& req = whole_parser.get();
  CheckHeadRules(req.base(), req.version());
  CheckTarget(req.target());
  CheckUpstreamHead(req.base());
  CheckBody(std::string_view(req.body().data(), req.body().size()));
  return 0;
}
