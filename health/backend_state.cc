#include "health/backend_state.h"

namespace geogate::health {

const char* HealthStateName(HealthState s) {
  switch (s) {
    case HealthState::kUnknown:
      return "unknown";
    case HealthState::kHealthy:
      return "healthy";
    case HealthState::kUnhealthy:
      return "unhealthy";
  }
  return "unknown";
}

const char* FailureReasonName(FailureReason r) {
  switch (r) {
    case FailureReason::kNone:
      return "none";
    case FailureReason::kConnectRefused:
      return "connect_refused";
    case FailureReason::kConnectTimeout:
      return "connect_timeout";
    case FailureReason::kProbeTimeout:
      return "probe_timeout";
    case FailureReason::kBadStatus:
      return "bad_status";
    case FailureReason::kTlsError:
      return "tls_error";
    case FailureReason::kReset:
      return "reset";
    case FailureReason::kUpstream5xx:
      return "upstream_5xx";
    case FailureReason::kFirstTokenTimeout:
      return "first_token_timeout";
    case FailureReason::kStreamIdle:
      return "stream_idle";
    case FailureReason::kEjected:
      return "ejected";
    case FailureReason::kProtocolError:
      return "protocol_error";
    case FailureReason::kCount:
      break;
  }
  return "unknown";
}

}  // namespace geogate::health
