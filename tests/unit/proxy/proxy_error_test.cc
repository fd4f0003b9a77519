#include <catch2/catch.hpp>

#include "proxy/proxy_error.h"

using namespace geogate;
using namespace geogate::proxy;
using health::FailureReason;

TEST_CASE("proxy error: only an upstream failure leaves another attempt worth making",
          "[proxy_error]") {
  CHECK(ProxyError::Upstream(FailureReason::kReset, "").retryable());
  CHECK(ProxyError::Upstream(FailureReason::kUpstream5xx, "b answered 503").retryable());
  CHECK_FALSE(ProxyError::ClientGone().retryable());
}

TEST_CASE("proxy error: the client's answer once no attempt is left", "[proxy_error]") {
  ClientAnswer none = AnswerFor(nullptr, 0);
  CHECK(none.kind == ErrorKind::kUpstreamFailed);
  CHECK(none.message == "retry deadline reached before any attempt");

  ProxyError stall = ProxyError::Upstream(FailureReason::kFirstTokenTimeout, "timed out");
  ClientAnswer a = AnswerFor(&stall, 2);
  CHECK(a.kind == ErrorKind::kFirstTokenTimeout);  // 504
  CHECK(SpecOf(a.kind).status == 504);
  CHECK(a.message ==
        "no backend produced a first token in time after 2 attempt(s): first_token_timeout "
        "(timed out)");

  ProxyError reset = ProxyError::Upstream(FailureReason::kConnectRefused, "");
  ClientAnswer b = AnswerFor(&reset, 1);
  CHECK(b.kind == ErrorKind::kUpstreamFailed);  // 502
  CHECK(SpecOf(b.kind).status == 502);
  CHECK(b.message == "every backend attempt failed after 1 attempt(s): connect_refused");
}
