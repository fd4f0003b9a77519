#include "bench/gpusim/sim_server.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <latch>
#include <random>
#include <thread>
#include <unordered_set>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/serialize.hpp>

namespace gpusim {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

namespace {

// Every asynchronous step returns its error as a value: no exceptions on
// the request path.
constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);
constexpr size_t kHeaderLimit = 16 * 1024;

using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

Clock::duration from_ms(double ms) {
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(ms * 1e6)));
}

double to_ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::string make_id_prefix() {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return buf;
}

std::string format_endpoint(const tcp::endpoint& ep) {
  const std::string host = ep.address().to_string();
  const std::string port = std::to_string(ep.port());
  return ep.address().is_v6() ? "[" + host + "]:" + port : host + ":" + port;
}

// How a generation ended.
enum class Outcome { kCompleted, kPeerGone, kReset };

enum class Gate { kOpen, kResumed, kCancelled };

// Fields of the --log-requests line, filled as the request progresses.
struct RequestLog {
  Clock::time_point start = Clock::now();
  std::string method;
  std::string path;
  std::string client;
  std::string model;
  unsigned status = 0;
  bool stream = false;
  int64_t tokens = 0;
  double ttft_ms = -1;
  const char* outcome = "completed";
};

}  // namespace

SimContext::SimContext(const Options& o)
    : options(o),
      responses(o),
      tunables(o.initial),
      stats(static_cast<size_t>(o.threads)),
      limiter(o.max_concurrency, o.queue_limit),
      recent(static_cast<size_t>(o.record_requests)),
      id_prefix(make_id_prefix()) {}

// One thread, one io_context, one SO_REUSEPORT acceptor, and the sessions
// it accepted. Everything below is touched only on the worker's thread
// except through post().
class Worker {
 public:
  Worker(SimContext& ctx, size_t index)
      : ctx_(ctx),
        index_(index),
        io_(1),
        work_(io_.get_executor()),
        acceptor_(io_),
        stall_gate_(io_, Clock::time_point::max()) {}

  error_code open(const tcp::endpoint& endpoint) {
    error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.set_option(ReusePort(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) endpoint_ = acceptor_.local_endpoint(ec);
    if (ec) {
      error_code ignored;
      acceptor_.close(ignored);
    }
    return ec;
  }

  const tcp::endpoint& endpoint() const { return endpoint_; }

  void close_acceptor() {
    ++generation_;
    error_code ignored;
    acceptor_.close(ignored);
  }

  void start() {
    if (acceptor_.is_open()) spawn_accept_loop();
    thread_ = std::thread([this] { io_.run(); });
  }

  void stop() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  template <class F>
  void post(F&& f) {
    asio::post(io_, std::forward<F>(f));
  }

  // Mode refuse: connects get ECONNREFUSED and open connections close.
  void refuse() {
    close_acceptor();
    for (beast::tcp_stream* s : connections_) {
      error_code ignored;
      s->socket().close(ignored);
    }
  }

  // Leaving refuse: listen again on the same port.
  void reopen() {
    if (acceptor_.is_open()) return;
    if (error_code ec = open(endpoint_)) {
      std::fprintf(stderr, "gpusim: cannot re-open %s: %s\n", format_endpoint(endpoint_).c_str(),
                   ec.message().c_str());
      return;
    }
    spawn_accept_loop();
  }

  // Leaving stall: every parked answer re-checks the mode.
  void wake_stalled() { stall_gate_.cancel(); }

  SimContext& ctx() { return ctx_; }
  StatsShard& stats() { return ctx_.stats.shard(index_); }
  asio::steady_timer& stall_gate() { return stall_gate_; }
  void track(beast::tcp_stream* s) { connections_.insert(s); }
  void untrack(beast::tcp_stream* s) { connections_.erase(s); }

  std::string next_id(std::string_view kind) {
    std::string id(kind);
    id += ctx_.id_prefix;
    id += std::to_string(index_);
    id += '-';
    id += std::to_string(++id_counter_);
    return id;
  }

 private:
  void spawn_accept_loop();
  asio::awaitable<void> accept_loop(uint64_t generation);

  SimContext& ctx_;
  const size_t index_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
  tcp::endpoint endpoint_;
  uint64_t generation_ = 0;  // bumps when the acceptor closes, retiring its loop
  asio::steady_timer stall_gate_;
  std::unordered_set<beast::tcp_stream*> connections_;
  uint64_t id_counter_ = 0;
  std::thread thread_;
};

namespace {

using PlainStream = beast::tcp_stream;
using TlsStream = asio::ssl::stream<beast::tcp_stream>;

// One client connection: reads requests in a keep-alive loop and answers
// them. Lives in the frame of serve_connection().
template <class Stream>
class Session {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  Session(Worker& worker, tcp::socket socket, std::string peer_ip)
      : worker_(worker),
        ctx_(worker.ctx()),
        stream_(make_stream(std::move(socket), worker.ctx())),
        peer_ip_(std::move(peer_ip)),
        timer_(beast::get_lowest_layer(stream_).get_executor()) {}

  asio::awaitable<void> run();

 private:
  using Request = http::request<http::string_body>;

  static Stream make_stream(tcp::socket socket, SimContext& ctx) {
    if constexpr (kTls) {
      return Stream(beast::tcp_stream(std::move(socket)), *ctx.tls);
    } else {
      return Stream(std::move(socket));
    }
  }

  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }
  void arm_idle_timeout() {
    if (ctx_.options.idle_timeout_ms > 0) {
      tcp().expires_after(from_ms(ctx_.options.idle_timeout_ms));
    } else {
      tcp().expires_never();
    }
  }

  template <class Body>
  void set_common_headers(http::response<Body>& res) {
    res.set(http::field::server, "geogate-gpusim");
    res.set("x-gpusim-backend", ctx_.responses.name());
    res.set("x-gpusim-region", ctx_.responses.region());
  }

  asio::awaitable<bool> read_request(http::request_parser<http::string_body>& parser);
  asio::awaitable<bool> serve(Request& req, RequestLog& log);
  asio::awaitable<bool> serve_generation(Endpoint endpoint, Request& req, const Tunables& t,
                                         RequestLog& log);
  asio::awaitable<bool> respond(unsigned status, std::string body, std::string_view content_type,
                                RequestLog& log, const Tunables* delay_from = nullptr);
  asio::awaitable<bool> write_response(unsigned status, std::string body,
                                       std::string_view content_type, RequestLog& log);
  asio::awaitable<bool> respond_error(const ApiError& error, RequestLog& log, const Tunables* t);
  asio::awaitable<bool> sleep_until(Clock::time_point deadline);
  asio::awaitable<Gate> pass_stall_gate();
  asio::awaitable<Outcome> watched(asio::awaitable<Outcome> work);
  asio::awaitable<void> watch_peer();
  asio::awaitable<Outcome> generate(const GenerationRequest& g, Tunables t,
                                    ConcurrencyLimiter::WaiterPtr waiter, RequestLog& log);
  asio::awaitable<bool> write_raw(const std::string& data);
  asio::awaitable<bool> write_stream_head();
  asio::awaitable<bool> write_full_head(size_t content_length);
  Clock::time_point on_grid(Clock::time_point target, Clock::time_point after) const;
  bool die_now(int64_t sent) const {
    return ctx_.tunables.mode() == Mode::kDieAfter && sent >= ctx_.tunables.die_after_n();
  }
  void reset_connection();
  void write_log(const RequestLog& log);

  Worker& worker_;
  SimContext& ctx_;
  Stream stream_;
  std::string peer_ip_;
  beast::flat_buffer buffer_;
  asio::steady_timer timer_;
  SseWriter sse_;
  std::string body_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool reset_ = false;  // the socket was aborted with a RST (die_after)
};

template <class Stream>
asio::awaitable<void> Session<Stream>::run() {
  worker_.track(&tcp());
  struct Untrack {
    Worker& w;
    beast::tcp_stream* s;
    ~Untrack() { w.untrack(s); }
  } untrack{worker_, &tcp()};

  if constexpr (kTls) {
    arm_idle_timeout();
    auto [ec] = co_await stream_.async_handshake(asio::ssl::stream_base::server, kNoThrow);
    if (ec) co_return;
  }
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(ctx_.options.max_body_bytes);
    if (!co_await read_request(parser)) break;
    tcp().expires_never();
    RequestLog log;
    if (!co_await serve(parser.get(), log)) break;
  }
  if (!reset_) {
    // A plain close (FIN). For TLS the close_notify is skipped on purpose: a
    // simulator need not wait for the peer's; the message framing already
    // told the client where the response ended.
    error_code ignored;
    tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    tcp().close();
  }
}

// Reads one request, answering 100-continue, 413 and 431 on the way.
template <class Stream>
asio::awaitable<bool> Session<Stream>::read_request(
    http::request_parser<http::string_body>& parser) {
  arm_idle_timeout();
  auto [ec, n] = co_await http::async_read_header(stream_, buffer_, parser, kNoThrow);
  if (!ec && parser.get()[http::field::expect] == "100-continue") {
    http::response<http::empty_body> cont{http::status::continue_, parser.get().version()};
    auto [wec, wn] = co_await http::async_write(stream_, cont, kNoThrow);
    ec = wec;
  }
  if (!ec && !parser.is_done()) {
    auto [rec, rn] = co_await http::async_read(stream_, buffer_, parser, kNoThrow);
    ec = rec;
  }
  if (!ec) co_return true;
  if (ec.category() != http::make_error_code(http::error::end_of_stream).category() ||
      ec == http::error::end_of_stream || ec == http::error::partial_message) {
    co_return false;  // closed, reset or timed out: nobody to answer
  }
  tcp().expires_never();
  keep_alive_ = false;
  RequestLog log;
  log.path = "(unparsed)";
  log.client = peer_ip_;
  ApiError error{400, "invalid_request_error", "bad_request", "malformed request: " + ec.message()};
  if (ec == http::error::header_limit) {
    error = {431, "invalid_request_error", "headers_too_large", "request headers too large"};
  } else if (ec == http::error::body_limit) {
    error = {413, "invalid_request_error", "body_too_large", "request body too large"};
  }
  co_await respond_error(error, log, nullptr);
  co_return false;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::serve(Request& req, RequestLog& log) {
  version_ = req.version();
  keep_alive_ = req.keep_alive();
  const std::string_view target = req.target();
  const std::string_view path = target.substr(0, target.find('?'));
  std::string_view client = peer_ip_;
  if (auto xff = req.find("x-forwarded-for"); xff != req.end()) {
    std::string_view first = xff->value();
    first = first.substr(0, first.find(','));
    while (!first.empty() && first.front() == ' ')
      first.remove_prefix(1);
    while (!first.empty() && first.back() == ' ')
      first.remove_suffix(1);
    if (!first.empty()) client = first;
  }
  log.method = req.method_string();
  log.path = path;
  log.client = client;

  StatsShard& stats = worker_.stats();
  const bool health = path == "/health";
  StatsShard::bump(health ? stats.health_checks : stats.requests_total);
  stats.count_request(path, client);
  if (!health && ctx_.recent.enabled()) {
    RecentRequests::Head head{std::string(req.method_string()), std::string(target), {}};
    for (const auto& field : req)
      head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    ctx_.recent.add(std::move(head));
  }
  const Tunables t = ctx_.tunables.snapshot();
  const bool get = req.method() == http::verb::get;
  const bool post = req.method() == http::verb::post;
  // Arguments of the coroutine calls below are named locals, never braced
  // temporaries or conditional co_awaits: GCC 12 can destroy such
  // temporaries twice across a suspension.
  const ApiError method_not_allowed{405, "invalid_request_error", "method_not_allowed",
                                    "method not allowed on " + std::string(path)};
  const ApiError simulated_500{500, "server_error", "internal_error",
                               "simulated failure (gpusim mode error500)"};
  const ApiError not_found{404, "invalid_request_error", "not_found",
                           "no such path: " + std::string(path)};
  const auto& limiter = ctx_.limiter;

  bool keep = false;
  if (health || path == "/v1/models") {
    if (!get) {
      keep = co_await respond_error(method_not_allowed, log, &t);
    } else if (t.mode == Mode::kError500) {
      keep = co_await respond_error(simulated_500, log, &t);
    } else {
      std::string body = health ? ctx_.responses.health_body(limiter.running(), limiter.waiting(),
                                                             limiter.utilization())
                                : ctx_.responses.models_body();
      keep = co_await respond(200, std::move(body), "application/json", log, &t);
    }
  } else if (path == "/metrics") {
    if (!get) {
      keep = co_await respond_error(method_not_allowed, log, &t);
    } else {
      std::string body =
          ctx_.responses.metrics_body(limiter.running(), limiter.waiting(), limiter.utilization(),
                                      ctx_.stats.sum(&StatsShard::prompt_tokens),
                                      ctx_.stats.sum(&StatsShard::tokens_generated));
      keep = co_await respond(200, std::move(body), "text/plain; version=0.0.4; charset=utf-8", log,
                              &t);
    }
  } else if (path == "/v1/chat/completions" || path == "/v1/completions" ||
             path == "/v1/embeddings" || path == "/v1/responses") {
    const Endpoint endpoint = path == "/v1/chat/completions" ? Endpoint::kChat
                              : path == "/v1/completions"    ? Endpoint::kCompletion
                              : path == "/v1/responses"      ? Endpoint::kResponses
                                                             : Endpoint::kEmbedding;
    if (!post) {
      keep = co_await respond_error(method_not_allowed, log, &t);
    } else if (t.mode == Mode::kError500) {
      keep = co_await respond_error(simulated_500, log, &t);
    } else {
      keep = co_await serve_generation(endpoint, req, t, log);
    }
  } else {
    keep = co_await respond_error(not_found, log, &t);
  }
  if (ctx_.options.log_requests) write_log(log);
  co_return keep;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::serve_generation(Endpoint endpoint, Request& req,
                                                        const Tunables& t, RequestLog& log) {
  auto parsed = ctx_.responses.parse(endpoint, req.body());
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) {
    co_return co_await respond_error(*error, log, &t);
  }
  const GenerationRequest& g = std::get<GenerationRequest>(parsed);
  StatsShard& stats = worker_.stats();
  log.model = ctx_.responses.model(g.model);
  log.stream = g.stream;
  stats.count_model(log.model);
  StatsShard::bump(stats.prompt_tokens, static_cast<uint64_t>(g.prompt_tokens));

  if (!co_await sleep_until(Clock::now() + from_ms(t.rtt_ms))) co_return false;
  ConcurrencyLimiter::WaiterPtr waiter;
  if (ctx_.limiter.admit(tcp().get_executor(), waiter) ==
      ConcurrencyLimiter::Admission::kRejected) {
    const ApiError queue_full{429, "rate_limit_error", "queue_full",
                              "the simulated GPU queue is full"};
    co_return co_await respond_error(queue_full, log, nullptr);
  }
  asio::awaitable<Outcome> work = generate(g, t, std::move(waiter), log);
  const Outcome outcome = co_await watched(std::move(work));
  if (outcome == Outcome::kCompleted) co_return keep_alive_;
  log.outcome = outcome == Outcome::kReset ? "reset" : "client_gone";
  if (g.stream && log.status == 200) {
    StatsShard::bump(outcome == Outcome::kReset ? stats.streams_aborted : stats.streams_cancelled);
  }
  co_return false;
}

// Runs `work` while watching the client: a client that closes or resets
// the connection cancels the work, which then frees its slot.
template <class Stream>
asio::awaitable<Outcome> Session<Stream>::watched(asio::awaitable<Outcome> work) {
  auto ex = co_await asio::this_coro::executor;
  auto [order, work_error, outcome, watch_error] =
      co_await asio::experimental::make_parallel_group(
          asio::co_spawn(ex, std::move(work), asio::deferred),
          asio::co_spawn(ex, watch_peer(), asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  if (reset_) co_return Outcome::kReset;
  if (work_error || order[0] == 1) co_return Outcome::kPeerGone;
  co_return outcome;
}

template <class Stream>
asio::awaitable<void> Session<Stream>::watch_peer() {
  co_await asio::this_coro::throw_if_cancelled(false);
  auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(4096), kNoThrow);
  if (ec) co_return;  // the peer went away, or the work finished and cancelled us
  // The client pipelined its next request: it is alive. Keep the bytes for
  // the next parse and wait for the work to finish. The work may have
  // finished already: a client that sends its next request the moment the
  // response arrives races the group's cancellation, which then reached the
  // completed read and would never reach the wait below (the connection
  // hung until the client gave up).
  buffer_.commit(n);
  auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none) co_return;
  asio::steady_timer park(co_await asio::this_coro::executor, Clock::time_point::max());
  co_await park.async_wait(kNoThrow);
}

template <class Stream>
asio::awaitable<Outcome> Session<Stream>::generate(const GenerationRequest& g, Tunables t,
                                                   ConcurrencyLimiter::WaiterPtr waiter,
                                                   RequestLog& log) {
  co_await asio::this_coro::throw_if_cancelled(false);
  // Queued: wait for a slot. `granted` is checked before each wait: the
  // wake-up may have been posted before the wait began.
  while (waiter && !waiter->granted.load(std::memory_order_acquire)) {
    co_await waiter->wake.async_wait(kNoThrow);
    if (waiter->granted.load(std::memory_order_acquire)) break;
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none && ctx_.limiter.abandon(*waiter)) {
      co_return Outcome::kPeerGone;
    }
  }
  struct Slot {
    ConcurrencyLimiter& limiter;
    ~Slot() { limiter.release(); }
  } slot{ctx_.limiter};

  const auto admitted = Clock::now();
  if (co_await pass_stall_gate() == Gate::kCancelled) co_return Outcome::kPeerGone;
  StatsShard& stats = worker_.stats();
  const int64_t total = g.completion_tokens;
  std::string id;
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  if (g.endpoint != Endpoint::kEmbedding) {
    id = worker_.next_id(g.endpoint == Endpoint::kChat        ? "chatcmpl-"
                         : g.endpoint == Endpoint::kResponses ? "resp_"
                                                              : "cmpl-");
  }
  if (g.stream) {
    sse_.begin(ctx_.responses, g, id, created, version_ >= 11);
    if (!co_await write_stream_head()) co_return Outcome::kPeerGone;
    log.status = 200;
    StatsShard::bump(stats.streams_started);
    // Responses API: response.created and the other opening events go out
    // with the head, a TTFT before the first output_text.delta.
    if (const std::string& prologue = sse_.prologue();
        !prologue.empty() && !co_await write_raw(prologue)) {
      co_return Outcome::kPeerGone;
    }
  } else {
    body_ = ctx_.responses.full_body(g, id, created);
  }
  if (die_now(0)) {
    // n = 0: the response head, then the reset.
    if (!g.stream && co_await write_full_head(body_.size())) log.status = 200;
    reset_connection();
    co_return Outcome::kReset;
  }

  const auto interval = from_ms(t.effective_interval_ms());
  auto deadline = on_grid(admitted + from_ms(t.effective_ttft_ms()), Clock::time_point{});
  if (total == 0 && !co_await sleep_until(deadline)) co_return Outcome::kPeerGone;
  for (int64_t i = 0; i < total; ++i) {
    if (!co_await sleep_until(deadline)) co_return Outcome::kPeerGone;
    if (co_await pass_stall_gate() == Gate::kCancelled) co_return Outcome::kPeerGone;
    if (g.stream && !co_await write_raw(sse_.token(i))) co_return Outcome::kPeerGone;
    if (i == 0) log.ttft_ms = to_ms(Clock::now() - log.start);
    log.tokens = i + 1;
    StatsShard::bump(stats.tokens_generated);
    if (die_now(i + 1)) {
      if (!g.stream && co_await write_full_head(body_.size())) log.status = 200;
      reset_connection();
      co_return Outcome::kReset;
    }
    // Late (back-pressure, a stall, a busy machine): go on from now rather
    // than burst to catch up.
    auto next = deadline + interval;
    if (const auto now = Clock::now(); next < now) next = now;
    deadline = on_grid(next, deadline);
  }

  if (co_await pass_stall_gate() == Gate::kCancelled) co_return Outcome::kPeerGone;
  if (!g.stream) {
    const bool written = co_await write_response(200, std::move(body_), "application/json", log);
    co_return written ? Outcome::kCompleted : Outcome::kPeerGone;
  }
  if (!co_await write_raw(sse_.finish())) co_return Outcome::kPeerGone;
  if (g.include_usage && !co_await write_raw(sse_.usage(g.prompt_tokens, total))) {
    co_return Outcome::kPeerGone;
  }
  if (!co_await write_raw(sse_.done())) co_return Outcome::kPeerGone;
  StatsShard::bump(stats.streams_completed);
  co_return Outcome::kCompleted;
}

// With --decode-step-ms every token lands on the shared grid, at most one
// per tick per stream, like a continuous-batching engine's decode steps.
template <class Stream>
Clock::time_point Session<Stream>::on_grid(Clock::time_point target,
                                           Clock::time_point after) const {
  if (ctx_.options.decode_step_ms <= 0) return target;
  const auto step = from_ms(ctx_.options.decode_step_ms);
  const auto origin = ctx_.grid_start;
  auto ticks = (target - origin + step - Clock::duration(1)) / step;
  auto t = origin + ticks * step;
  if (t <= after) t = origin + ((after - origin) / step + 1) * step;
  return t;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::sleep_until(Clock::time_point deadline) {
  if (deadline <= Clock::now()) co_return true;
  timer_.expires_at(deadline);
  auto [ec] = co_await timer_.async_wait(kNoThrow);
  co_return !ec;
}

// Mode stall: park until the mode changes. kCancelled when the client left.
template <class Stream>
asio::awaitable<Gate> Session<Stream>::pass_stall_gate() {
  Gate result = Gate::kOpen;
  while (ctx_.tunables.mode() == Mode::kStall) {
    result = Gate::kResumed;
    co_await worker_.stall_gate().async_wait(kNoThrow);
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none) co_return Gate::kCancelled;
  }
  co_return result;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::write_raw(const std::string& data) {
  auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(data), kNoThrow);
  co_return !ec;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::write_stream_head() {
  http::response<http::empty_body> res{http::status::ok, version_};
  set_common_headers(res);
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  if (version_ >= 11) {
    res.chunked(true);
    res.keep_alive(keep_alive_);
  } else {
    keep_alive_ = false;  // HTTP/1.0: the body ends with the connection
    res.keep_alive(false);
  }
  http::response_serializer<http::empty_body> sr{res};
  auto [ec, n] = co_await http::async_write_header(stream_, sr, kNoThrow);
  co_return !ec;
}

// The head of a non-streamed answer whose body will never come (die_after).
template <class Stream>
asio::awaitable<bool> Session<Stream>::write_full_head(size_t content_length) {
  http::response<http::empty_body> res{http::status::ok, version_};
  set_common_headers(res);
  res.set(http::field::content_type, "application/json");
  res.content_length(content_length);
  res.keep_alive(keep_alive_);
  http::response_serializer<http::empty_body> sr{res};
  auto [ec, n] = co_await http::async_write_header(stream_, sr, kNoThrow);
  co_return !ec;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::respond(unsigned status, std::string body,
                                               std::string_view content_type, RequestLog& log,
                                               const Tunables* delay_from) {
  if (delay_from && !co_await sleep_until(Clock::now() + from_ms(delay_from->rtt_ms))) {
    co_return false;
  }
  co_await pass_stall_gate();
  const bool written = co_await write_response(status, std::move(body), content_type, log);
  co_return written&& keep_alive_;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::write_response(unsigned status, std::string body,
                                                      std::string_view content_type,
                                                      RequestLog& log) {
  http::response<http::string_body> res{static_cast<http::status>(status), version_};
  set_common_headers(res);
  res.set(http::field::content_type, content_type);
  res.keep_alive(keep_alive_);
  res.body() = std::move(body);
  res.prepare_payload();
  log.status = status;
  auto [ec, n] = co_await http::async_write(stream_, res, kNoThrow);
  co_return !ec;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::respond_error(const ApiError& error, RequestLog& log,
                                                     const Tunables* t) {
  std::string body = error_body(error);
  co_return co_await respond(error.status, std::move(body), "application/json", log, t);
}

// die_after: abort with a TCP RST (SO_LINGER 0, then close).
template <class Stream>
void Session<Stream>::reset_connection() {
  reset_ = true;
  error_code ignored;
  tcp().socket().set_option(tcp::socket::linger(true, 0), ignored);
  tcp().socket().close(ignored);
}

template <class Stream>
void Session<Stream>::write_log(const RequestLog& log) {
  json::object line{
      {"ts", static_cast<double>(std::time(nullptr))},
      {"backend", ctx_.responses.name()},
      {"method", log.method},
      {"path", log.path},
      {"client", log.client},
      {"status", log.status},
      {"duration_ms", to_ms(Clock::now() - log.start)},
      {"outcome", log.outcome},
  };
  if (!log.model.empty()) {
    line["model"] = log.model;
    line["stream"] = log.stream;
    line["tokens"] = log.tokens;
    if (log.ttft_ms >= 0) line["ttft_ms"] = log.ttft_ms;
  }
  std::string text = json::serialize(line);
  text += '\n';
  std::lock_guard lock(ctx_.log_mu);
  std::fwrite(text.data(), 1, text.size(), stderr);
}

template <class Stream>
asio::awaitable<void> serve_connection(Worker& worker, tcp::socket socket, std::string peer_ip) {
  Session<Stream> session(worker, std::move(socket), std::move(peer_ip));
  co_await session.run();
}

void log_session_failure(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "gpusim: session failed: %s\n", ex.what());
  }
}

}  // namespace

void Worker::spawn_accept_loop() {
  asio::co_spawn(io_, accept_loop(generation_), log_session_failure);
}

asio::awaitable<void> Worker::accept_loop(uint64_t generation) {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(kNoThrow);
    if (generation != generation_) co_return;  // this acceptor was closed (refuse)
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      // Out of descriptors and the like: back off rather than spin.
      asio::steady_timer pause(io_, std::chrono::milliseconds(10));
      co_await pause.async_wait(kNoThrow);
      continue;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    const tcp::endpoint peer = socket.remote_endpoint(ignored);
    std::string ip = peer.address().to_string();
    if (ctx_.tls) {
      asio::co_spawn(io_, serve_connection<TlsStream>(*this, std::move(socket), std::move(ip)),
                     log_session_failure);
    } else {
      asio::co_spawn(io_, serve_connection<PlainStream>(*this, std::move(socket), std::move(ip)),
                     log_session_failure);
    }
  }
}

SimServer::SimServer(const Options& options) : ctx_(options) {
  for (int i = 0; i < options.threads; ++i) {
    workers_.push_back(std::make_unique<Worker>(ctx_, static_cast<size_t>(i)));
  }
}

SimServer::~SimServer() {
  for (auto& w : workers_)
    w->stop();
}

bool SimServer::bind(std::string& error) {
  const Options& o = ctx_.options;
  if (!o.tls_cert.empty()) {
    ctx_.tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    error_code ec;
    ctx_.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                              asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                              asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                          ec);
    if (!ec) ctx_.tls->use_certificate_chain_file(o.tls_cert, ec);
    if (!ec) ctx_.tls->use_private_key_file(o.tls_key, asio::ssl::context::pem, ec);
    if (ec) {
      error = "TLS setup (" + o.tls_cert + ", " + o.tls_key + "): " + ec.message();
      return false;
    }
  }

  error_code ec;
  asio::ip::address address = asio::ip::make_address(o.listen.host, ec);
  if (ec) {
    asio::io_context io;
    tcp::resolver resolver(io);
    auto results = resolver.resolve(o.listen.host, "", ec);
    if (ec || results.empty()) {
      error = "cannot resolve " + o.listen.host;
      return false;
    }
    address = results.begin()->endpoint().address();
  }
  tcp::endpoint endpoint(address, o.listen.port);
  for (auto& w : workers_) {
    if (error_code bind_ec = w->open(endpoint)) {
      error = "cannot listen on " + format_endpoint(endpoint) + ": " + bind_ec.message();
      return false;
    }
    endpoint = w->endpoint();  // port 0 resolved by the first worker
  }
  if (o.initial.mode == Mode::kRefuse) {
    for (auto& w : workers_)
      w->close_acceptor();
  }
  return true;
}

std::string SimServer::bound_address() const {
  return format_endpoint(workers_.front()->endpoint());
}

uint16_t SimServer::port() const {
  return workers_.front()->endpoint().port();
}

void SimServer::start() {
  for (auto& w : workers_)
    w->start();
}

Tunables SimServer::apply(const TunablesUpdate& update) {
  std::lock_guard lock(apply_mu_);
  const auto [before, after] = ctx_.tunables.apply(update);
  void (Worker::*action)() = nullptr;
  if (before.mode != Mode::kRefuse && after.mode == Mode::kRefuse) action = &Worker::refuse;
  if (before.mode == Mode::kRefuse && after.mode != Mode::kRefuse) action = &Worker::reopen;
  const bool wake = before.mode == Mode::kStall && after.mode != Mode::kStall;
  if (action || wake) {
    // Wait for every worker, so the caller of POST /control can rely on the
    // port being closed (or open) when the answer arrives.
    std::latch done(static_cast<std::ptrdiff_t>(workers_.size()));
    for (auto& w : workers_) {
      w->post([&done, worker = w.get(), action, wake] {
        if (action) (worker->*action)();
        if (wake) worker->wake_stalled();
        done.count_down();
      });
    }
    done.wait();
  }
  return after;
}

}  // namespace gpusim
