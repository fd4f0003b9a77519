#include "proxy/proxy.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <span>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include "absl/strings/str_cat.h"
#include "accounting/showback_record.h"
#include "common/await.h"
#include "common/block_cache.h"
#include "health/health_service.h"
#include "health/retry_budget.h"
#include "proxy/client_writer.h"
#include "proxy/cors.h"
#include "proxy/headers.h"
#include "proxy/proxy_error.h"
#include "proxy/relay_parse.h"
#include "proxy/response_head.h"
#include "proxy/sse_observer.h"
#include "proxy/trace_hooks.h"
#include "proxy/upstream_response_parser.h"
#include "proxy/watchdog.h"
#include "routing/decide.h"
#include "routing/live_health_view.h"

namespace geogate::proxy {

namespace {

using health::FailureReason;
using Clock = std::chrono::steady_clock;

constexpr auto kHealthWatchPeriod = std::chrono::milliseconds(25);

double MillisSince(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// Time left at `now` until `deadline`, at least 1 ms; a far deadline saturates.
health::Millis Remaining(Clock::time_point deadline, Clock::time_point now) {
  if (deadline - now > std::chrono::hours(24)) return std::chrono::hours(24);
  return std::max(std::chrono::duration_cast<health::Millis>(deadline - now), health::Millis(1));
}

// Folds a new sample into an EWMA kept in an atomic (microseconds; -1 =
// empty). Several workers may update at once: a lost update only loses one
// sample's weight, so a relaxed CAS loop is plenty.
void UpdateEwma(std::atomic<int64_t>& ewma, int64_t sample_us, double alpha) {
  int64_t old = ewma.load(std::memory_order_relaxed);
  for (;;) {
    int64_t next = old < 0 ? sample_us
                           : static_cast<int64_t>(static_cast<double>(old) +
                                                  alpha * static_cast<double>(sample_us - old));
    if (ewma.compare_exchange_weak(old, next, std::memory_order_relaxed)) return;
  }
}

// Waits `d` on the worker's timers (in tests: simulated time, which the
// test moves).
net::awaitable<void> SleepFor(health::TimerFactory& timers, health::Millis d) {
  health::TimerPtr timer;
  auto executor = co_await net::this_coro::executor;
  co_await net::async_initiate<decltype(common::kAwait), void()>(
      [&](auto handler) {
        auto pending = std::make_shared<decltype(handler)>(std::move(handler));
        timer = timers.create([pending, executor] { net::post(executor, std::move(*pending)); });
        timer->enable(d);
      },
      common::kAwait);
}

// Counts a request against a backend's in-flight total (process-wide),
// from its attempt's start to the end of its relay (Run moves it there).
class InflightGuard {
 public:
  InflightGuard() = default;
  explicit InflightGuard(health::BackendState& s) : s_(&s) {
    s_->inflight.fetch_add(1, std::memory_order_relaxed);
  }
  ~InflightGuard() { Reset(); }
  InflightGuard(InflightGuard&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  InflightGuard& operator=(InflightGuard&& o) noexcept {
    if (this != &o) {
      Reset();
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }

 private:
  void Reset() {
    if (s_ != nullptr) s_->inflight.fetch_sub(1, std::memory_order_relaxed);
    s_ = nullptr;
  }
  health::BackendState* s_ = nullptr;
};

// Watches the client socket while the request is with a backend. A client
// that goes away (EOF or reset) cancels the upstream request by closing the
// upstream connection, so a GPU stops generating tokens nobody will read.
// Only the raw TCP socket is peeked, never read, so no request bytes are
// consumed; a client that sends data meanwhile (pipelining, a TLS alert)
// simply ends the watch, and write errors catch it later.
//
// The watch starts only once the request actually waits: at the first
// health poll while the first byte is awaited (every 25 ms), while queued
// for capacity, and when a relay waits for more of the body. Asio tries a
// receive on an empty queue at once, so a watch armed per request cost one
// empty recvfrom per request, about a sixth of a short request's syscalls;
// answers that come at once never need it.
class DisconnectWatch {
 public:
  explicit DisconnectWatch(Stream& client) : client_(&client) {}
  ~DisconnectWatch() {
    if (!state_) return;  // never started: nothing was queued
    state_->active = false;
    state_->target = nullptr;
    // A wait left pending would make the session's next read the second
    // read op on the socket, which costs Asio an epoll_ctl per request. The
    // response is written by now: nothing else is pending on the socket.
    if (state_->waiting && state_->client != nullptr) state_->client->cancel();
    state_->client = nullptr;
  }
  DisconnectWatch(const DisconnectWatch&) = delete;
  DisconnectWatch& operator=(const DisconnectWatch&) = delete;

  /// Starts watching (once; later calls do nothing). The state shared with
  /// the pending receive is made here, so a request answered at once costs
  /// no allocation for it.
  void Start() {
    if (state_) return;
    state_ = std::allocate_shared<State>(common::PooledAllocator<State>());
    state_->client = client_;
    state_->target = target_;
    Arm(state_);
  }
  /// The upstream connection to close when the client disappears.
  void Target(Stream* upstream) {
    target_ = upstream;
    if (state_) state_->target = upstream;
  }
  bool gone() const { return state_ && state_->gone; }

 private:
  struct State {
    Stream* client = nullptr;
    Stream* target = nullptr;
    bool active = true;
    bool gone = false;
    bool waiting = false;
    char peek = 0;
  };

  // A MSG_PEEK receive rather than async_wait(wait_read): Asio queues a
  // receive on a socket it knows is drained without any syscall, while a
  // wait always re-registers the descriptor with epoll_ctl. One byte is
  // peeked and left in the socket for the session's next read.
  static void Arm(const std::shared_ptr<State>& st) {
    st->waiting = true;
    st->client->async_peek_byte(&st->peek, [st](boost::system::error_code ec, size_t n) {
      st->waiting = false;
      if (ec == net::error::operation_aborted || !st->active || st->client == nullptr) return;
      if (!ec && n > 0) return;  // data, not a close: stop watching
      if (ec == net::error::would_block || ec == net::error::try_again) {
        Arm(st);
        return;
      }
      st->gone = true;  // EOF or an error: the client is gone
      if (st->target != nullptr) st->target->close();
    });
  }

  Stream* client_;
  Stream* target_ = nullptr;
  std::shared_ptr<State> state_;  // null until Start()
};

struct AttemptResult {
  bool committed = false;   // the response head reached the client
  bool keep_alive = false;  // when committed: may the client connection stay open
  // Why the attempt failed; when committed, the relay's failure (the client
  // left, or the backend broke mid-stream: the stream_interrupted event).
  std::optional<ProxyError> error;
  unsigned upstream_status = 0;
};

// A committed attempt's result (its relay's).
AttemptResult Relayed(bool keep_alive) {
  AttemptResult r;
  r.committed = true;
  r.keep_alive = keep_alive;
  return r;
}

// The exchange of an attempt that committed (its response head came, with
// a status below 500): Attempt fills it and returns, Run has Relay relay the
// body. A stream's lifetime holds Run's and Relay's frames, not Attempt's.
struct CommittedExchange {
  UpstreamConnPtr conn;  // null until an attempt commits
  common::PooledPtr<UpstreamResponseParser> parser;
  InflightGuard inflight;  // the backend's in-flight count, until the relay ends
  size_t first = 0;        // body bytes in the relay buffer already
  bool reusable = false;   // set by Relay: the connection may serve another request
};

// A broken exchange: a malformed response is the backend's protocol error,
// anything else a reset. A passed deadline never gets here: the Watchdog
// closed the socket, and ExchangeFailed reads why from it.
FailureReason ClassifyExchangeError(const boost::system::error_code& ec) {
  if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message)
    return FailureReason::kProtocolError;
  return FailureReason::kReset;
}

// A connection from the pool that the backend closed while it sat idle
// fails on first use with no response byte: that is not the backend's fault.
bool IsStaleConnectionError(const boost::system::error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == http::error::partial_message;
}

class ProxyCall {
 public:
  ProxyCall(RequestContext& ctx, common::PooledPtr<RequestBody> body)
      : ctx_(ctx),
        body_(std::move(body)),
        worker_(ctx.worker),
        shared_(ctx.worker.shared()),
        up_cfg_(ctx.cfg.gateway.upstream),
        watch_(ctx.session.stream()),
        wd_(ctx.session.watchdog()),
        relay_lease_(ctx.worker.relay_buffers(), nullptr),
        client_out_(ctx.session.stream(), ctx.session.watchdog(), ctx.worker.time(),
                    up_cfg_.stream_idle_timeout, ctx.bytes_out, ctx.worker.metrics().bytes_out) {}

  ~ProxyCall() { wd_.Disarm(); }
  ProxyCall(const ProxyCall&) = delete;
  ProxyCall& operator=(const ProxyCall&) = delete;

  /// `self` is this call: Run's frame owns it until the request is done.
  net::awaitable<bool> Run(common::PooledPtr<ProxyCall> self);

 private:
  // The worker's clock, reached through worker_ (not a member of its own:
  // the call must stay within the block cache's largest class).
  Clock::time_point Now() const { return worker_.time().monotonic(); }
  net::awaitable<bool> Select(routing::Decision& decision);
  void BuildUpstreamRequest();
  void BuildAttemptHead(const config::Backend& b);
  void ReleaseRequestCopies();
  /// One attempt at `backend`, its result in `r`. The result is the
  /// caller's (Run's `last`), not the value of the awaitable: that would
  /// be one more copy of it in Run's frame, which a stream holds.
  net::awaitable<void> Attempt(size_t backend, Clock::time_point deadline, AttemptResult& r);
  AttemptResult ExchangeFailed(boost::system::error_code ec);
  /// Relays the body of exchange_ (committed by Attempt) to the client;
  /// the result in `r`, as Attempt's.
  net::awaitable<void> Relay(size_t backend, AttemptResult& r);
  /// After Relay: the connection back to the pool when it may serve again.
  void EndExchange(size_t backend);
  /// The backend failed (`ec`) after the client got the head: the response
  /// can no longer be retried. An SSE client (`sse_chunked`: an SSE body
  /// the gateway frames) gets one error event and a clean end of the
  /// chunked body; anything else is cut so it cannot be mistaken for
  /// complete (so is an SSE stream whose client has part of an event: the
  /// error event would be read as its rest). Not in Relay: its locals would
  /// be in Relay's frame for every stream's life.
  net::awaitable<void> StreamBroke(size_t backend, boost::system::error_code ec,
                                   SseObserver& observer, bool sse_chunked, AttemptResult& r);
  net::awaitable<boost::system::error_code> SendRest(Stream& s,
                                                     std::span<const net::const_buffer> bufs,
                                                     size_t sent);
  /// Relayed bytes through the observer (which may hold some back or take
  /// the TTFT), then offered to the client with `head` before them; when
  /// they are the body's `last`, with what the observer held back and the
  /// end of the body in the same write.
  /// @return false when some is left for client_out_.Flush().
  bool WriteToClientNow(std::string_view data, ResponseHead* head, SseObserver& observer,
                        bool last);
  net::awaitable<bool> FailAll(const AttemptResult& last);
  net::awaitable<bool> Fail(ErrorKind kind, std::string_view message, int retry_after = -1);
  void ReportFailure(size_t backend, FailureReason reason);
  // Not inline in Relay: its locals would grow Relay's coroutine frame.
  void AddClientHeaders(std::string_view upstream_fields, const config::Backend& b,
                        ResponseHead& head);
  /// The request-end record of the committed attempt (ctx_.usage): tokens,
  /// GPU time (from the request's send to now) and cost.
  void AccountTokens(size_t backend, SseObserver& sse);
  /// The client went away during the relay. The GPU worked until then: it
  /// is accounted like a finished response.
  AttemptResult ClientLeft(size_t backend, SseObserver& sse);
  /// A TTFT sample of the committed attempt (sent at `t0`, first token at `t_first`).
  void LearnTtft(size_t backend, Clock::time_point t0, Clock::time_point t_first);
  size_t DrainBuffered(UpstreamConn& conn, UpstreamResponseParser& parser, size_t got,
                       boost::system::error_code& ec);
  using ReadResult = std::tuple<boost::system::error_code, size_t>;
  /// One read from the backend into the connection's buffer, straight from
  /// the socket (TLS: the TLS stream): TakeUpstreamRead commits it,
  /// DrainBuffered parses it. The operation itself, awaited by the caller
  /// (no coroutine). `token` is common::kAwait, or kAwait bound to an
  /// executor that runs the completion.
  template <class Token>
  static auto ReadUpstream(UpstreamConn& conn, Token token, size_t bytes = kUpstreamReadBytes) {
    return conn.stream.async_read_some(conn.buffer.prepare(bytes), std::move(token));
  }
  static boost::system::error_code TakeUpstreamRead(UpstreamConn& conn,
                                                    UpstreamResponseParser& parser,
                                                    ReadResult read);
  static boost::system::error_code TakeUpstreamHeadRead(UpstreamConn& conn,
                                                        UpstreamResponseParser& parser,
                                                        ReadResult read);

  RequestContext& ctx_;
  common::PooledPtr<RequestBody> body_;  // until BuildUpstreamRequest made up_body_
  Worker& worker_;
  ServerShared& shared_;
  const config::Upstream& up_cfg_;
  DisconnectWatch watch_;
  Watchdog& wd_;  // the session's: deadlines of every read and write below
  // Both from the block cache: with reserve() below they fit its 256- and
  // 512-byte classes for ordinary heads, instead of two mallocs per request.
  common::PooledString up_fields_;  // the forwarded fields every attempt sends (Host, key excluded)
  common::PooledString up_body_;
  common::PooledString up_head_;  // request line, this attempt's Host and key, up_fields_, length
  std::string_view original_target_;            // in ctx_.req, which outlives the call
  health::RetryBudget::RetryGuard retry_slot_;  // held from a retry's start to its commit
  // When the committed attempt's request went to the backend: the GPU works
  // for the request from then on (prefill, then decode), so showback's
  // stream wall time starts here, not at the first response byte.
  Clock::time_point sent_at_{};
  // A Responses stream's attempt start while its TTFT waits for the first
  // output delta; Clock::time_point{} otherwise.
  Clock::time_point ttft_from_{};
  // Taken when body bytes are parsed into it (DrainBuffered), given back
  // while a flowing stream waits for its backend with nothing in it.
  common::BufferPool::Lease relay_lease_;
  CommittedExchange exchange_;
  ClientWriter client_out_;  // everything the client gets of a relayed response
};

net::awaitable<bool> ProxyCall::Fail(ErrorKind kind, std::string_view message, int retry_after) {
  ErrorSpec spec = SpecOf(kind);
  ctx_.status = spec.status;
  ctx_.outcome = observability::RequestOutcome::kRejected;
  ctx_.error_code = spec.code;
  co_return co_await ctx_.session.SendError(&ctx_.req, kind, message, ctx_.request_id, retry_after,
                                            &ctx_.bytes_out);
}

void ProxyCall::AddClientHeaders(std::string_view upstream_fields, const config::Backend& b,
                                 ResponseHead& head) {
  ResponseTags tags{
      ctx_.cfg.gateway.edge, ctx_.cfg.regions[b.region_index].name, b.name, ctx_.request_id,
      ctx_.cfg.gateway.residency_header ? ctx_.residency.RuleLabel(ctx_.cfg) : std::string_view()};
  head.AppendFields(upstream_fields);
  AddResponseTags(head, tags);
  AddCorsResponseFields(head, ctx_.rt.cors(ctx_.session.listener_index()),
                        ctx_.req[http::field::origin]);
}

void ProxyCall::ReportFailure(size_t backend, FailureReason reason) {
  const config::Backend& b = ctx_.cfg.backends[backend];
  worker_.metrics().upstream_errors.Add({b.name, health::FailureReasonName(reason)});
  if (shared_.health != nullptr) shared_.health->ReportFailure(ctx_.rt.backends[backend], reason);
}

// select_upstream. Waits up to routing.queue_timeout_ms for room when every
// candidate is at capacity. @return false when the request was answered.
net::awaitable<bool> ProxyCall::Select(routing::Decision& d) {
  routing::RequestFacts facts{ctx_.model, ctx_.tenant_config()};
  const auto select_start = Now();
  auto queue_deadline = select_start + ctx_.cfg.routing.queue_timeout;
  // The first decision at select_start: no clock read between the two.
  for (Clock::time_point now = select_start;; now = Now()) {
    routing::LiveHealthView view(ctx_.rt.backends, health::ToNanos(now));
    d = routing::Decide(ctx_.cfg, facts, ctx_.residency.allowed, view, worker_.Random());
    if (d.outcome != routing::Outcome::kCapacity || now >= queue_deadline) break;
    watch_.Start();
    co_await SleepFor(worker_.timers(), std::chrono::ceil<health::Millis>(std::min<Clock::duration>(
                                            std::chrono::milliseconds(5), queue_deadline - now)));
    if (watch_.gone()) {
      ctx_.status = 499;
      ctx_.outcome = observability::RequestOutcome::kClientClosed;
      co_return false;
    }
  }
  worker_.metrics().selections.Add({d.why});  // why the winner won, or the outcome
  // Rendered once into a per-thread buffer and kept in a cached block: no
  // allocation per request for the access log's route field.
  thread_local std::string reason;
  reason.clear();
  d.AppendReason(ctx_.cfg, reason);
  ctx_.route_reason.assign(reason);
  if (ctx_.trace) TraceRouting(ctx_, d, select_start, Now());
  switch (d.outcome) {
    case routing::Outcome::kRoute:
      co_return true;
    case routing::Outcome::kResidencyDenied:
      co_await Fail(ErrorKind::kResidencyDenied,
                    "model '" + std::string(ctx_.model_name()) +
                        "' is served only outside the regions data residency allows (" +
                        ctx_.residency.Reason(ctx_.cfg) + ")");
      co_return false;
    case routing::Outcome::kNoHealthy:
      co_await Fail(ErrorKind::kNoCompliantBackend,
                    "no healthy backend in the allowed regions serves model '" +
                        std::string(ctx_.model_name()) + "'",
                    1);
      co_return false;
    case routing::Outcome::kCapacity:
      co_await Fail(
          ErrorKind::kCapacityExhausted,
          "every allowed backend for model '" + std::string(ctx_.model_name()) + "' is at capacity",
          1);
      co_return false;
  }
  co_return false;
}

void ProxyCall::BuildUpstreamRequest() {
  original_target_ = ctx_.req.target();
  ForwardInfo fwd;
  // X-Forwarded-For gets the address the connection came from (the PROXY
  // header's source on such a listener), as text the session wrote once.
  fwd.peer_ip = ctx_.session.source_text();
  fwd.client_tls = ctx_.session.tls();
  fwd.request_id = ctx_.request_id;
  fwd.replace_trace_context = ctx_.trace != nullptr;
  up_fields_.reserve(common::kPooledStringMax / 2);  // a 256-byte block; grows into a 512-byte one
  HeaderText fields(up_fields_);
  PrepareUpstreamHeaders(ctx_.req.base(), fields, fwd);
  // The usage chunk is requested for accounting when the client did not ask
  // for it; SseObserver strips it from the client's stream again.
  // The Responses API always reports usage and has no include_usage option
  // (OpenAI refuses unknown parameters): its body is left alone.
  std::optional<common::PooledString> rewritten =
      body_->Rewrite(ctx_.model_name(), /*request_usage=*/!ctx_.responses_api());
  body_.reset();
  // The client's body is not needed again (its size is already recorded):
  // move it rather than copy up to max_body_bytes per request.
  if (rewritten)
    up_body_ = std::move(*rewritten);
  else
    up_body_ = std::move(ctx_.req.body());
}

// HTTP/1.1 to the backend (keep-alive by default, so no Connection field),
// framed by Content-Length as Beast's prepare_payload would.
void ProxyCall::BuildAttemptHead(const config::Backend& b) {
  up_head_.clear();
  up_head_.reserve(up_fields_.size() + 256);
  up_head_.append(ctx_.req.method_string()).append(" ");
  up_head_.append(b.base_path).append(original_target_).append(" HTTP/1.1\r\n");
  HeaderText fields(up_head_);
  SetBackendHeaders(fields, b);
  if (ctx_.trace) SetUpstreamTraceHeaders(*ctx_.trace, fields);
  up_head_ += up_fields_;
  http::verb m = ctx_.req.method();
  if (!up_body_.empty() || m == http::verb::post || m == http::verb::put ||
      m == http::verb::options) {
    char num[24];
    auto [end, ec] = std::to_chars(num, num + sizeof num, up_body_.size());
    fields.set(http::field::content_length, std::string_view(num, end - num));
  }
  up_head_ += "\r\n";
}

// What the attempts sent (the request's head, forwarded fields and body)
// goes back to the block cache once one attempt is committed, rather than
// living as long as the stream.
void ProxyCall::ReleaseRequestCopies() {
  for (common::PooledString* s : {&up_head_, &up_fields_, &up_body_}) {
    s->clear();
    s->shrink_to_fit();
  }
}

net::awaitable<bool> ProxyCall::Run(common::PooledPtr<ProxyCall> /*self*/) {
  // The backends the attempts may use, best first: a copy of the decision's
  // plan, cut at max_attempts (config: at most kMaxAttempts). The decision
  // itself (328 bytes) is in a cached block only while selecting: in this
  // frame, which a stream holds for its whole life, it would cost that.
  std::array<uint32_t, config::kMaxAttempts> plan{};
  size_t max_attempts = 0;
  {
    common::PooledPtr<routing::Decision> decision = common::MakePooled<routing::Decision>();
    if (!co_await Select(*decision)) co_return ctx_.status != 499 && ctx_.req.keep_alive();
    max_attempts = std::min<size_t>({up_cfg_.max_attempts, decision->plan.size(), plan.size()});
    std::copy_n(decision->plan.begin(), max_attempts, plan.begin());
  }
  BuildUpstreamRequest();

  auto deadline = ctx_.start + up_cfg_.retry_deadline;
  AttemptResult last;
  // Active requests size the retry budget; a retry holds a slot until done.
  health::RetryBudget::RequestGuard budget_request;
  if (shared_.retry_budget != nullptr) budget_request = shared_.retry_budget->StartRequest();
  for (size_t i = 0; i < max_attempts; ++i) {
    size_t backend = plan[i];
    if (i > 0) {
      // retry_deadline_ms bounds retries; the first attempt always starts,
      // even after a wait in the capacity queue longer than the deadline.
      if (Now() >= deadline) break;
      // A retry: counted against the process-wide budget so a region-wide
      // failure does not multiply the load on what is left, unless the
      // backend failed without serving (health::IsFreeReroute).
      if (shared_.retry_budget != nullptr && !health::IsFreeReroute(last.error->reason)) {
        retry_slot_ = shared_.retry_budget->TryRetry();
        if (!retry_slot_) {
          worker_.metrics().retry_budget_exhausted++;
          break;
        }
      }
      worker_.metrics().failovers.Add({health::FailureReasonName(last.error->reason)});
    }
    ctx_.attempts++;
    // The first attempt may use all of first_token_timeout_ms (a long
    // prompt's prefill is legitimate); retries start only before the retry
    // deadline and are cut at it.
    if (ctx_.trace) BeginAttemptTrace(ctx_, Now());
    co_await Attempt(backend, i == 0 ? Clock::time_point::max() : deadline, last);
    if (exchange_.conn) {
      co_await Relay(backend, last);
      EndExchange(backend);
    }
    // A relayed attempt ends with its relay: the request's span ends there
    // too (RequestContext::relay_end), so the attempt's cannot end later.
    if (ctx_.trace)
      EndAttemptTrace(ctx_, backend, i, last.committed,
                      last.error ? last.error->reason : FailureReason::kNone,
                      last.error ? std::string_view(last.error->detail) : std::string_view(),
                      last.upstream_status, ctx_.end_time());
    if (last.committed) co_return last.keep_alive;
    BOOST_ASSERT(last.error);        // an attempt that did not commit says why
    if (!last.error->retryable()) {  // the client left
      ctx_.status = 499;
      ctx_.outcome = observability::RequestOutcome::kClientClosed;
      worker_.metrics().client_disconnects++;
      co_return false;
    }
    ReportFailure(backend, last.error->reason);
  }
  co_return co_await FailAll(last);
}

net::awaitable<bool> ProxyCall::FailAll(const AttemptResult& last) {
  const ProxyError* error = last.error ? &*last.error : nullptr;
  ClientAnswer answer = AnswerFor(error, ctx_.attempts);
  bool keep = co_await Fail(answer.kind, answer.message);
  ctx_.outcome = observability::RequestOutcome::kUpstreamFailed;
  if (error != nullptr && ctx_.attempts != 0)
    ctx_.upstream_error = health::FailureReasonName(error->reason);
  co_return keep;
}

net::awaitable<void> ProxyCall::Attempt(size_t backend, Clock::time_point deadline,
                                        AttemptResult& r) {
  const config::Backend& b = ctx_.cfg.backends[backend];
  health::BackendState& state = *ctx_.rt.backends[backend];
  InflightGuard inflight(state);
  r = {};
  auto t0 = Now();

  BuildAttemptHead(b);

  UpstreamConnPtr conn = worker_.upstreams().TakeIdle(b, t0, up_cfg_.pool_idle_timeout);
  bool reused = conn != nullptr;
  // Not in this frame: 272 bytes more made it 1056, past what Asio
  // recycles, so every attempt cost a malloc large enough to make glibc
  // consolidate its fast bins.
  common::PooledPtr<UpstreamResponseParser> parser;
  // The clock as of the last wait: read again only after one (a connect, a
  // stale connection's read), not several times in one synchronous stretch.
  Clock::time_point now = t0;
  for (;;) {
    if (!conn) {
      auto budget = Remaining(deadline, now);
      ConnectResult cr = co_await worker_.upstreams().Connect(
          b, ctx_.rt.backend_tls[backend], std::min(up_cfg_.connect_timeout, budget));
      if (watch_.gone()) {
        r.error = ProxyError::ClientGone();
        co_return;
      }
      if (!cr.conn) {
        r.error = ProxyError::Upstream(cr.failure, std::move(cr.error));
        co_return;
      }
      conn = std::move(cr.conn);
      now = Now();
    }
    conn->uses++;
    watch_.Target(&conn->stream);
    parser = common::MakePooled<UpstreamResponseParser>();
    // Until the first body byte: the first-token deadline, and a backend the
    // health checks take out of rotation meanwhile is abandoned at once.
    auto ttft_budget = std::min(up_cfg_.first_token_timeout, Remaining(deadline, now));
    wd_.Disarm();
    wd_.PollHealth(&state, kHealthWatchPeriod, now, [this] { watch_.Start(); });
    sent_at_ = now;
    wd_.Guard(&conn->stream, sent_at_ + ttft_budget);
    std::array<net::const_buffer, 2> request{net::buffer(up_head_), net::buffer(up_body_)};
    boost::system::error_code ec;
    size_t sent = conn->stream.TrySendNow(request);
    if (sent != net::buffer_size(request)) ec = co_await SendRest(conn->stream, request, sent);
    // The head, read straight from the socket like the body below (Beast's
    // composed read_header costs three more layers of handlers per read).
    while (!ec && !parser->is_header_done()) {
      ReadResult read = co_await ReadUpstream(*conn, common::kAwait);
      ec = TakeUpstreamHeadRead(*conn, *parser, read);
    }
    if (!ec) break;
    if (reused && !parser->got_some() && IsStaleConnectionError(ec) && !watch_.gone() &&
        !wd_.abandoned() && !wd_.expired()) {
      watch_.Target(nullptr);
      wd_.Disarm();  // it points at the connection about to go
      conn.reset();
      reused = false;
      now = Now();
      continue;
    }
    r = ExchangeFailed(ec);
    co_return;
  }

  r.upstream_status = parser->status();
  if (r.upstream_status >= 500) {
    watch_.Target(nullptr);
    r.error = ProxyError::Upstream(FailureReason::kUpstream5xx,
                                   absl::StrCat(b.name, " answered ", r.upstream_status));
    co_return;  // the connection is dropped with its unread body
  }

  // Hold the head until the first body bytes arrive (or the body is empty):
  // until then a failure is still invisible to the client and retryable.
  // Body bytes that came with the head are taken without another read.
  boost::system::error_code body_ec;
  size_t first = parser->is_done() ? 0 : DrainBuffered(*conn, *parser, 0, body_ec);
  while (!body_ec && !parser->is_done() && first == 0) {
    ReadResult read = co_await ReadUpstream(*conn, common::kAwait);
    body_ec = TakeUpstreamRead(*conn, *parser, read);
    if (!body_ec) first = DrainBuffered(*conn, *parser, 0, body_ec);
  }
  if (body_ec) {
    r = ExchangeFailed(body_ec);
    co_return;
  }
  wd_.StopPolling();
  // Committed: a retry that got here is an ordinary request from now on.
  retry_slot_.reset();
  auto t_first = Now();
  ctx_.backend = backend;
  ctx_.status = r.upstream_status;
  // The TTFT estimates learn only from successful streams; the probe
  // measures RTT. A non-streaming answer's first byte comes after the whole
  // generation: as a TTFT sample it would push routing away from the
  // backend that just served it (DESIGN.md §8, "TTFT comes from streams").
  bool learn = r.upstream_status < 400 && ctx_.stream;
  if (learn && ctx_.responses_api() && parser->event_stream() && !parser->encoded()) {
    // A Responses stream opens with response.created before any token: its
    // TTFT is taken at the first output delta (WriteToClientNow).
    ttft_from_ = t0;
  } else {
    ctx_.ttft_ms = MillisSince(ctx_.start, t_first);
    if (learn) LearnTtft(backend, t0, t_first);
  }
  health::HealthService::ReportSuccess(state);
  exchange_.conn = std::move(conn);  // Run has Relay relay the body
  exchange_.parser = std::move(parser);
  exchange_.inflight = std::move(inflight);
  exchange_.first = first;
  co_return;
}

// Why an exchange failed before the client saw anything, so the attempt is
// still retryable: the client left, the health checks took the backend out,
// the first token did not come in time, or the backend broke (`ec`).
AttemptResult ProxyCall::ExchangeFailed(boost::system::error_code ec) {
  AttemptResult r;
  watch_.Target(nullptr);
  if (watch_.gone())
    r.error = ProxyError::ClientGone();
  else if (wd_.abandoned())
    r.error = ProxyError::Upstream(FailureReason::kProbeTimeout,
                                   "backend taken out of rotation by health checks while waiting");
  else if (wd_.expired())
    r.error = ProxyError::Upstream(FailureReason::kFirstTokenTimeout,
                                   beast::error_code(beast::error::timeout).message());
  else
    r.error = ProxyError::Upstream(ClassifyExchangeError(ec), ec.message());
  return r;
}

net::awaitable<void> ProxyCall::StreamBroke(size_t backend, boost::system::error_code ec,
                                            SseObserver& observer, bool sse_chunked,
                                            AttemptResult& r) {
  const config::Backend& b = ctx_.cfg.backends[backend];
  FailureReason reason =
      ec == beast::error::timeout ? FailureReason::kStreamIdle : FailureReason::kReset;
  ReportFailure(backend, reason);
  worker_.metrics().streams_interrupted++;
  r = Relayed(/*keep_alive=*/false);
  r.error = ProxyError::Upstream(reason, ec.message());
  ctx_.outcome = observability::RequestOutcome::kInterrupted;
  ctx_.error_code = "stream_interrupted";  // the code of the SSE error event
  ctx_.upstream_error = health::FailureReasonName(reason);
  if (sse_chunked && observer.at_event_end()) {
    wd_.Disarm();  // its deadline was the backend's
    std::string message =
        absl::StrCat("backend ", b.name, " failed mid-stream: ", health::FailureReasonName(reason));
    std::string event = ctx_.responses_api()
                            ? ResponsesStreamErrorEvent(message, observer.responses_events())
                            : StreamErrorEvent(message);
    co_await client_out_.End(event);
  } else {
    ctx_.session.Close();
  }
  AccountTokens(backend, observer);
}

void ProxyCall::EndExchange(size_t backend) {
  watch_.Target(nullptr);
  CommittedExchange done = std::move(exchange_);
  // first and reusable too: a stale reusable would pool a broken connection
  // if another attempt ever followed a relay.
  exchange_ = {};
  // As many idle as the backend can have requests in flight (its
  // capacity): fewer, and every request over that number would pay a
  // connect, a close and a TIME_WAIT (docs/configuration.md).
  // Reusable only after a relay that ended well, which read the clock
  // (AccountTokens) just before.
  if (done.reusable)
    worker_.upstreams().Release(
        std::move(done.conn), ctx_.relay_end,
        up_cfg_.pool_max_idle.value_or(ctx_.cfg.backends[backend].capacity));
}

net::awaitable<void> ProxyCall::Relay(size_t backend, AttemptResult& r) {
  UpstreamConn& conn = *exchange_.conn;
  UpstreamResponseParser& parser = *exchange_.parser;
  const size_t first = exchange_.first;
  const config::Backend& b = ctx_.cfg.backends[backend];
  ReleaseRequestCopies();  // sent, and no other attempt will send them again
  bool client_http11 = ctx_.req.version() >= 11;
  bool sse = parser.event_stream();
  // An SSE body the gateway can read as events: not one a backend encoded
  // (gzip, br) although asked for identity, which passes through unread.
  bool events = sse && !parser.encoded();

  // Framing towards the client: keep an exact Content-Length when the
  // backend gave one, else chunked (close-delimited for HTTP/1.0 clients).
  bool complete_in_first = parser.is_done();
  std::optional<uint64_t> length;
  if (auto cl = parser.content_length())
    length = *cl;
  else if (complete_in_first && !(events && !ctx_.include_usage && client_http11))
    length = first;  // a stream whose usage chunk goes is re-framed even when it came whole
  bool chunked = !length && client_http11;
  bool keep_alive = ctx_.req.keep_alive() && (length || chunked) &&
                    !shared_.draining.load(std::memory_order_relaxed);

  // The usage chunk can only be removed from a body the gateway re-frames
  // (chunked): a Content-Length body is relayed byte for byte.
  SseObserver observer(
      sse, ctx_.include_usage || !chunked,
      ctx_.responses_api() ? SseObserver::Api::kResponses : SseObserver::Api::kChat);
  if (parser.encoded()) observer.set_encoded();
  observer.set_gap_sink([this, backend](std::span<const double> gaps) {
    worker_.metrics().token_gap.ObserveAll({ctx_.cfg.backends[backend].name}, gaps);
  });
  ResponseHead head(parser.status(), parser.reason(), ctx_.req.version());
  AddClientHeaders(parser.forwarded_fields(), b, head);
  // The client's head has what it needs of the backend's, which is not
  // read again: its block goes now, not when a stream that holds the
  // parser for minutes ends.
  parser.ReleaseFields();
  head.SetFraming(length, chunked, keep_alive);
  if (sse) shared_.active_streams.fetch_add(1, std::memory_order_relaxed);
  struct StreamCount {
    ServerShared& s;
    bool on;
    ~StreamCount() {
      if (on) s.active_streams.fetch_sub(1, std::memory_order_relaxed);
    }
  } stream_count{shared_, sse};

  client_out_.set_chunked(chunked);
  relay_lease_.Retake();  // held already when the head came with body bytes
  // The relay buffer's bytes not yet written: the body's last ones, with
  // the head still before them when the whole body came with it, go out
  // with the end of the body in one write (below the loop).
  size_t got = first;
  ResponseHead* last_head = &head;
  if (!parser.is_done()) {
    bool written =
        WriteToClientNow(std::string_view(relay_lease_.data(), first), &head, observer, false);
    if (!written) written = co_await client_out_.Flush();
    if (!written) {
      r = ClientLeft(backend, observer);
      co_return;
    }
    got = 0;
    last_head = nullptr;
    head.Release();  // written: its block goes back for the rest of the stream
  }

  BasicRelayReadSize<kUpstreamReadBytes, kUpstreamTrickleReadBytes> read_size;
  while (!parser.is_done()) {
    // Bytes left over from the last read (more than one relay buffer) go
    // out before reading again.
    boost::system::error_code ec;
    got = DrainBuffered(conn, parser, 0, ec);
    if (!ec && got == 0 && !parser.is_done()) {
      watch_.Start();
      wd_.Guard(&conn.stream, Now() + up_cfg_.stream_idle_timeout);
      // Everything relayed so far went out (the observer copies what it
      // holds back): the relay buffer goes back to the pool while the
      // stream waits, often most of its life (a token every few ms or s).
      relay_lease_.Return();
      // So does the connection's 16 KiB read buffer when the stream
      // trickles (BasicRelayReadSize): it waits with a small one.
      read_size.ShrinkWhileTrickling(conn.buffer);
      // A stream that already flows: the read completes through the
      // worker's bulk queue, after what new requests have ready.
      ReadResult read = co_await ReadUpstream(
          conn, net::bind_executor(worker_.bulk().executor(), common::kAwait), read_size.next());
      read_size.Read(std::get<1>(read));
      ec = TakeUpstreamRead(conn, parser, read);
      if (!ec) got = DrainBuffered(conn, parser, 0, ec);
    }
    if (ec && wd_.expired()) ec = beast::error::timeout;
    if (ec) {
      if (watch_.gone()) {
        r = ClientLeft(backend, observer);
        co_return;
      }
      co_await StreamBroke(backend, ec, observer, events && chunked, r);
      co_return;
    }
    if (got == 0 || parser.is_done()) continue;  // the last bytes go with the end
    bool written =
        WriteToClientNow(std::string_view(relay_lease_.data(), got), nullptr, observer, false);
    if (!written) written = co_await client_out_.Flush();
    if (!written) {
      r = ClientLeft(backend, observer);
      co_return;
    }
  }
  // The last bytes and the end of the body (observer.Finish, which also
  // reads a JSON body's usage), one write.
  bool ended =
      WriteToClientNow(std::string_view(relay_lease_.data(), got), last_head, observer, true);
  if (!ended) ended = co_await client_out_.Flush();
  if (!ended) {
    if (!client_out_.data_reached()) {
      r = ClientLeft(backend, observer);
      co_return;
    }
    keep_alive = false;
    ctx_.outcome =
        observability::RequestOutcome::kClientClosed;  // the end of the body never reached it
  }
  wd_.Disarm();
  AccountTokens(backend, observer);
  exchange_.reusable = parser.keep_alive();
  r = Relayed(keep_alive);
}

// Parses what the connection's buffer holds into the relay buffer after
// its first `got` bytes (see ParseBufferedBody).
size_t ProxyCall::DrainBuffered(UpstreamConn& conn, UpstreamResponseParser& parser, size_t got,
                                boost::system::error_code& ec) {
  relay_lease_.Retake();
  size_t n =
      ParseBufferedBody(parser, conn.buffer, relay_lease_.data(), kRelayBufferBytes, got, ec);
  // Nothing to relay: the buffer goes back at once, so an attempt waiting
  // for its first body byte (a prefill may take seconds) does not hold one.
  if (n == 0) relay_lease_.Return();
  return n;
}

// The backend closing the connection ends a close-delimited body, and cuts
// any other (partial_message).
boost::system::error_code ProxyCall::TakeUpstreamRead(UpstreamConn& conn,
                                                      UpstreamResponseParser& parser,
                                                      ReadResult read) {
  auto [ec, n] = read;
  conn.buffer.commit(n);
  if (ec == net::error::eof || ec == net::ssl::error::stream_truncated) {
    ec = {};
    parser.put_eof(ec);
  }
  return ec;
}

// Commits a read of the response head and parses what the buffer holds, up
// to the end of the head (body bytes stay buffered for DrainBuffered). The
// errors are those of Beast's read_header: the backend closing before any
// byte is end_of_stream (a stale pooled connection), within the head
// partial_message; need_more only asks for the next read.
boost::system::error_code ProxyCall::TakeUpstreamHeadRead(UpstreamConn& conn,
                                                          UpstreamResponseParser& parser,
                                                          ReadResult read) {
  auto [ec, n] = read;
  conn.buffer.commit(n);
  if (ec == net::error::eof || ec == net::ssl::error::stream_truncated) {
    if (!parser.got_some()) return http::error::end_of_stream;
    ec = {};
    parser.put_eof(ec);
    return ec;
  }
  if (ec) return ec;
  size_t used = parser.put(conn.buffer.data(), ec);
  conn.buffer.consume(used);
  if (ec == http::error::need_more) ec = {};
  return ec;
}

// Writes the rest of the request to the backend after the first `sent`
// bytes went at once (Stream::TrySendNow), under the deadline the caller set.
net::awaitable<boost::system::error_code> ProxyCall::SendRest(
    Stream& s, std::span<const net::const_buffer> bufs, size_t sent) {
  beast::buffers_suffix<std::span<const net::const_buffer>> rest(bufs);
  rest.consume(sent);
  auto [ec, n] = co_await net::async_write(s, rest, common::kAwait);
  co_return ec;
}

bool ProxyCall::WriteToClientNow(std::string_view data, ResponseHead* head, SseObserver& observer,
                                 bool last) {
  const Clock::time_point now = Now();  // one read: the data and the end came together
  std::string_view out = observer.Filter(data, now);
  std::string_view rest = last ? observer.Finish(now) : std::string_view();
  if (ttft_from_ != Clock::time_point{} && observer.first_content_at() != Clock::time_point{}) {
    ctx_.ttft_ms = MillisSince(ctx_.start, observer.first_content_at());
    LearnTtft(ctx_.backend, ttft_from_, observer.first_content_at());
    ttft_from_ = {};
  }
  std::string_view head_text = head != nullptr ? head->text() : std::string_view();
  return last ? client_out_.TryWriteLast(head_text, out, rest)
              : client_out_.TryWrite(head_text, out);
}

void ProxyCall::LearnTtft(size_t backend, Clock::time_point t0, Clock::time_point t_first) {
  const config::Backend& b = ctx_.cfg.backends[backend];
  health::BackendState& state = *ctx_.rt.backends[backend];
  double ttft_ms = MillisSince(t0, t_first);
  const auto sample_us = static_cast<int64_t>(ttft_ms * 1000);
  const int64_t at_ns = health::ToNanos(t_first);
  UpdateEwma(state.ttft_ewma_us, sample_us, ctx_.cfg.routing.ewma_alpha);
  state.ttft_at_ns.store(at_ns, std::memory_order_relaxed);
  if (health::ModelTtft* slot =
          state.ClaimModelSlot(health::ModelKey(ctx_.cfg.models[ctx_.model].name))) {
    UpdateEwma(slot->ewma_us, sample_us, ctx_.cfg.routing.ewma_alpha);
    slot->at_ns.store(at_ns, std::memory_order_relaxed);
  }
  worker_.metrics().ttft.Observe({b.name}, ttft_ms / 1000.0);
}

AttemptResult ProxyCall::ClientLeft(size_t backend, SseObserver& sse) {
  worker_.metrics().client_disconnects++;
  ctx_.outcome = observability::RequestOutcome::kClientClosed;
  AccountTokens(backend, sse);
  AttemptResult r = Relayed(/*keep_alive=*/false);
  r.error = ProxyError::ClientGone();
  return r;
}

void ProxyCall::AccountTokens(size_t backend, SseObserver& sse) {
  sse.FlushGaps();  // to the token-gap histogram, like the batches before
  const config::Tenant* t = ctx_.tenant_config();
  int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       worker_.time().system().time_since_epoch())
                       .count();
  ctx_.relay_end = Now();
  // GPU-seconds = stream wall time / capacity (the request's share of one
  // GPU); cost = GPU-seconds x cost_per_hour / 3600 (docs/showback.md).
  // Charged when the request ends (request_handler.cc), from this record.
  ctx_.usage = common::MakePooled<accounting::ShowbackRecord>(accounting::MakeShowbackRecord(
      ctx_.cfg, backend, t ? std::string_view(t->name) : std::string_view(), ctx_.model_name(),
      sse.prompt_tokens(), sse.completion_tokens(), sse.estimated(),
      std::chrono::duration<double>(ctx_.relay_end - sent_at_).count(), now_ms));
}

}  // namespace

// Allocated from the block cache: it must fit its largest class.
static_assert(sizeof(ProxyCall) <= common::block_cache::kLargestBlock);

net::awaitable<bool> ProxyRequest(RequestContext& ctx, common::PooledPtr<RequestBody> body) {
  // Off the session's coroutine frame, so idle connections stay small; the
  // relay buffer inside comes from the worker's pool.
  // Not a coroutine itself: Run's frame owns the call, one frame fewer.
  common::PooledPtr<ProxyCall> call = common::MakePooled<ProxyCall>(ctx, std::move(body));
  ProxyCall* p = call.get();
  return p->Run(std::move(call));
}

}  // namespace geogate::proxy
