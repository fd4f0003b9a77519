#include "proxy/request_target.h"

#include <boost/url/grammar/charset.hpp>
#include <boost/url/grammar/lut_chars.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <boost/url/url.hpp>

namespace geogate::proxy {

namespace {

constexpr std::string_view kApiRoot = "/v1/";

// Fixed texts: a refusal costs no allocation, and nothing has to keep a
// message alive while the 400 is written.
RequestTarget Refuse(std::string_view error) {
  RequestTarget t;
  t.error = error;
  return t;
}

// "%2E", "%2F" or "%00" in any case: octets a backend or sidecar that
// decodes before it routes would read as a dot segment, a separator or the
// end of the string, none of which the gateway saw.
bool CarriesEncodedSeparator(std::string_view path) {
  for (size_t i = path.find('%'); i != std::string_view::npos; i = path.find('%', i + 1)) {
    if (i + 2 >= path.size()) break;  // a cut escape: the parser has refused it
    char hi = path[i + 1];
    char lo = path[i + 2];
    if (hi == '2' && (lo == 'e' || lo == 'E' || lo == 'f' || lo == 'F')) return true;
    if (hi == '0' && lo == '0') return true;
  }
  return false;
}

// "/." starts every dot segment, since the path starts with '/'.
bool MayHoldDotSegment(std::string_view path) {
  return path.find("/.") != std::string_view::npos;
}

// Only a '%' (an escape to normalise) or a dot segment can make the
// normalised path differ.
bool MayNeedNormalising(std::string_view path) {
  return path.find('%') != std::string_view::npos || MayHoldDotSegment(path);
}

// RFC 3986 unreserved characters and '/'. A target of these alone is an
// origin-form absolute-path (1*( "/" segment ), a segment being *pchar) with
// no query and no escape, so without a "/." it is already normal: what the
// parse below would return, for a pass over the bytes instead of Boost.URL's
// grammar (about 2,000 instructions for "/v1/chat/completions").
constexpr boost::urls::grammar::lut_chars kPlainPathChars =
    boost::urls::unreserved_chars + boost::urls::grammar::lut_chars('/');

bool IsPlainNormalPath(std::string_view target) {
  return boost::urls::grammar::find_if_not(target.data(), target.data() + target.size(),
                                           kPlainPathChars) == target.data() + target.size() &&
         !MayHoldDotSegment(target);  // and no '%', by the set above
}

}  // namespace

RequestTarget NormalizeRequestTarget(std::string_view target, std::string& storage) {
  if (target.empty() || target.front() != '/')
    return Refuse("request target must be a path: geogate is not a forward proxy");
  if (IsPlainNormalPath(target)) {
    RequestTarget out;
    out.ok = true;
    out.path = target;
    out.target = target;
    return out;
  }
  // origin-form = absolute-path [ "?" query ]. Parsing makes no copy.
  auto parsed = boost::urls::parse_origin_form(target);
  if (!parsed) {
    if (target.find('#') != std::string_view::npos)
      return Refuse("request target must not carry a fragment ('#')");
    return Refuse("request target is not a valid path (RFC 3986 origin-form)");
  }
  std::string_view path(parsed->encoded_path().data(), parsed->encoded_path().size());
  if (CarriesEncodedSeparator(path)) {
    return Refuse("request path must not carry an encoded '/', '.' or NUL (%2F, %2E, %00)");
  }
  RequestTarget out;
  out.ok = true;
  if (!MayNeedNormalising(path)) {
    out.path = path;
    out.target = target;
    return out;
  }
  // Percent-encoding normalisation (RFC 3986 §6.2.2.2) and dot-segment
  // removal (§5.2.4). Boost.URL 1.81 keeps a ".." that climbs above the root
  // ("/../x") where the RFC drops it; such a path is outside /v1/ either way,
  // and refused below.
  boost::urls::url normal(*parsed);
  normal.normalize_path();
  std::string_view normal_path(normal.encoded_path().data(), normal.encoded_path().size());
  if (!normal_path.starts_with(kApiRoot)) {
    return Refuse(
        "request path is outside /v1/ once its dot segments are removed (RFC 3986 section 5.2.4)");
  }
  storage.assign(normal_path);
  size_t path_size = storage.size();
  // The query goes on exactly as the client sent it.
  storage.append(target.substr(path.size()));
  out.path = std::string_view(storage).substr(0, path_size);
  out.target = storage;
  return out;
}

std::optional<std::string> ModelIdOfTarget(std::string_view target) {
  constexpr std::string_view kPrefix = "/v1/models/";
  if (!target.starts_with(kPrefix)) return std::nullopt;
  auto parsed = boost::urls::parse_origin_form(target);
  if (!parsed) return std::nullopt;
  std::string_view path(parsed->encoded_path().data(), parsed->encoded_path().size());
  std::string_view raw = path.substr(kPrefix.size());
  if (raw.empty() || raw.find('/') != std::string_view::npos || raw == "." || raw == "..")
    return std::nullopt;
  // The parser has checked every escape is well formed.
  std::string id = boost::urls::pct_string_view(raw).decode();
  if (id.empty() || id.find('\0') != std::string::npos || id == "." || id == "..")
    return std::nullopt;
  return id;
}

}  // namespace geogate::proxy
