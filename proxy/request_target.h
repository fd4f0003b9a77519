// The request target as the gateway routes and forwards it (DESIGN.md §8,
// "Paths"): an origin-form target (RFC 9112 §3.2.1) whose path has its dot
// segments removed (RFC 3986 §5.2.4, done by Boost.URL) before anything looks
// at it. Refused, for a 400 bad_request: a target that is not origin-form, a
// fragment ('#'), a path carrying an encoded '/', '.' or NUL (%2F, %2E, %00 in
// any case), and a path that normalisation takes outside /v1/.
//
// The ordinary target ("/v1/chat/completions": unreserved characters and
// '/', no "/.") is already normal: it is returned as it is, without a parse;
// one with a '%' or a "/." is parsed (no allocation) and normalised.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace geogate::proxy {

struct RequestTarget {
  bool ok = false;
  std::string_view path;    // the normalised path: what routing looks at
  std::string_view target;  // the normalised path plus the query as sent: what goes upstream
  std::string_view error;   // why it was refused (a fixed client-facing text) when !ok
};

/// Normalises `target` (the request line's target).
/// @param storage holds the normalised target when it differs from `target`;
///        the returned path and target point into `target` or `storage`.
/// @return ok with the path and target to use, or !ok with the reason.
RequestTarget NormalizeRequestTarget(std::string_view target, std::string& storage);

/// The model id of a `/v1/models/{id}` target (the SDKs' models.retrieve),
/// percent-decoded: ids such as "meta-llama/Llama-3.1-8B" arrive with their
/// '/' as %2F. The gateway answers these itself and never forwards them, so
/// the encoded-separator rule above does not apply to the id. The id must be
/// one non-empty segment (no raw '/'), not "." or "..", and decode to
/// something without NUL.
/// @return the decoded id, or nullopt when `target` is not such a target.
std::optional<std::string> ModelIdOfTarget(std::string_view target);

}  // namespace geogate::proxy
