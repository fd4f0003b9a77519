#include "proxy/proxy_error.h"

#include "absl/strings/str_cat.h"

namespace geogate::proxy {

ClientAnswer AnswerFor(const ProxyError* last, size_t attempts) {
  if (attempts == 0 || last == nullptr)
    return {ErrorKind::kUpstreamFailed, "retry deadline reached before any attempt"};
  std::string why =
      absl::StrCat("after ", attempts, " attempt(s): ", health::FailureReasonName(last->reason));
  if (!last->detail.empty()) absl::StrAppend(&why, " (", last->detail, ")");
  if (last->reason == health::FailureReason::kFirstTokenTimeout)
    return {ErrorKind::kFirstTokenTimeout, "no backend produced a first token in time " + why};
  return {ErrorKind::kUpstreamFailed, "every backend attempt failed " + why};
}

}  // namespace geogate::proxy
