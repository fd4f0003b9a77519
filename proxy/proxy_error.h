// The data plane's one error type (Pingora's Error is the model): where a
// failure of a proxied request came from, why, whether another attempt may
// still answer the request, and the one mapping from it to what the client
// is told when no attempt is left.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "health/backend_state.h"
#include "proxy/openai_error.h"

namespace geogate::proxy {

/// Whose fault a failure is.
enum class ErrorSource : uint8_t {
  kClient,    // the client went away: nobody is left to answer
  kUpstream,  // the backend refused, broke, stalled or answered 5xx
};

struct ProxyError {
  static ProxyError ClientGone() {
    return {ErrorSource::kClient, health::FailureReason::kNone, {}};
  }
  static ProxyError Upstream(health::FailureReason reason, std::string detail) {
    return {ErrorSource::kUpstream, reason, std::move(detail)};
  }

  /// Another backend may still answer: the client is still there and saw
  /// nothing of this attempt (a committed attempt never gets here).
  bool retryable() const { return source == ErrorSource::kUpstream; }

  ErrorSource source = ErrorSource::kUpstream;
  health::FailureReason reason = health::FailureReason::kNone;  // kUpstream: what the backend did
  std::string detail;  // for the client's message and the log
};

/// What the client is told once no attempt is left.
struct ClientAnswer {
  ErrorKind kind;
  std::string message;
};

/// The answer after `attempts` attempts of which `last` failed last (none
/// when the retry deadline passed before the first). A first-token stall is
/// a 504, every other upstream failure a 502.
ClientAnswer AnswerFor(const ProxyError* last, size_t attempts);

}  // namespace geogate::proxy
