// The real proxy call (ProxyRequest) without sockets, in simulated time: the
// client's connection and every upstream connection are Beast test streams
// (the test-transport build of proxy/, stream.h), and a scripted
// UpstreamConnector decides, per Connect, whether a backend refuses or
// answers with bytes the test wrote. The failures a backend can have are
// the ones its stream can: it closes, before or in the middle of a response.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/json/parse.hpp>

#include "config/loader.h"
#include "proxy/proxy.h"
#include "proxy/relay_parse.h"
#include "proxy/request_body.h"
#include "proxy/request_context.h"
#include "proxy/session.h"
#include "proxy/sse_observer.h"
#include "proxy/upstream_connector.h"
#include "proxy/worker.h"
#include "routing/residency.h"
#include "testing/simulated_time.h"

#include "in_memory.h"

using namespace geogate;
using namespace geogate::observability;
using namespace geogate::proxy;
using namespace geogate::proxy::testing;
namespace test = boost::beast::test;

namespace {

// What one Connect does: refuse, or open a connection whose backend has
// already written `response` and then, if `close_after`, closes.
struct ConnectStep {
  static ConnectStep Refuse() { return {true, {}, false}; }
  static ConnectStep Serve(std::string response, bool close_after = false) {
    return {false, std::move(response), close_after};
  }
  bool refuse = false;
  std::string response;
  bool close_after = false;
};

// A connection the test holds the backend's end of.
struct BackendEnd {
  std::string backend;
  std::unique_ptr<test::stream> remote;  // what the gateway wrote is in remote->str()
};

class ScriptedConnector final : public UpstreamConnector {
 public:
  /// Connections are opened on `ioc` (the worker's, made after this).
  void Bind(net::io_context& ioc) { ioc_ = &ioc; }

  /// The next Connect calls, in order (whatever backend they are for).
  std::deque<ConnectStep> steps;
  /// Backends Connect was called for, in order.
  std::vector<std::string> connects;
  /// Every connection handed out, pooled ones first.
  std::vector<BackendEnd> ends;
  size_t released = 0;

  /// Keeps an idle connection to `backend` whose backend already closed it
  /// (after the pool's liveness check, before its next use).
  void AddStaleIdle(const std::string& backend) {
    UpstreamConnPtr conn = Open(backend);
    ends.back().remote->close();
    idle_.push_back(std::move(conn));
  }

  UpstreamConnPtr TakeIdle(const config::Backend& backend, health::MonotonicTime,
                           health::Millis) override {
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if ((*it)->key != backend.name) continue;
      UpstreamConnPtr conn = std::move(*it);
      idle_.erase(it);
      return conn;
    }
    return nullptr;
  }

  net::awaitable<ConnectResult> Connect(const config::Backend& backend, const SslContextPtr&,
                                        health::Millis) override {
    connects.push_back(backend.name);
    ConnectResult r;
    if (steps.empty()) {
      r.failure = health::FailureReason::kConnectRefused;
      r.error = "no script left";
      co_return r;
    }
    ConnectStep step = std::move(steps.front());
    steps.pop_front();
    if (step.refuse) {
      r.failure = health::FailureReason::kConnectRefused;
      r.error = "Connection refused";
      co_return r;
    }
    r.conn = Open(backend.name);
    test::stream& remote = *ends.back().remote;
    if (!step.response.empty()) {
      boost::system::error_code ec;
      net::write(remote, net::buffer(step.response), ec);
    }
    if (step.close_after) remote.close();
    co_return r;
  }

  /// The connection opened last (owned by whoever holds it now).
  UpstreamConn* last_conn = nullptr;

  /// Drops every connection (before the io_context they use goes).
  void Clear() {
    idle_.clear();
    ends.clear();
  }

  void Release(UpstreamConnPtr conn, health::MonotonicTime, uint32_t) override {
    ++released;
    idle_.push_back(std::move(conn));
  }

 private:
  UpstreamConnPtr Open(const std::string& backend) {
    test::stream local(*ioc_);
    auto remote = std::make_unique<test::stream>(*ioc_);
    local.connect(*remote);
    auto conn = std::make_unique<UpstreamConn>(Stream(std::move(local)));
    conn->key = backend;
    last_conn = conn.get();
    ends.push_back({backend, std::move(remote)});
    return conn;
  }

  net::io_context* ioc_ = nullptr;
  std::vector<UpstreamConnPtr> idle_;
};

constexpr std::string_view kOk =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n"
    "{\"answer\":42}";

// A worker in simulated time whose upstreams come from the script, one
// client connection over a test stream, and one request on it.
struct CallFixture {
  /// @param extra TOML appended to the two backends' configuration.
  explicit CallFixture(std::string_view extra = {}) {
    connector.Bind(worker.ioc());
    shared.runtime.Publish(MakeRuntime(TwoBackends(extra)));
    test::stream server_end(worker.ioc());
    server_end.connect(client);
    session.emplace(worker, Stream(std::move(server_end)), routing::IpAddr::FromV4(0x7f000001),
                    ListenerSpec{});
  }

  ~CallFixture() {
    if (!done) {  // a call left waiting (a test failed): end it first
      client.close();
      for (BackendEnd& e : connector.ends)
        e.remote->close();
      RunReady();
    }
    ctx.reset();
    session.reset();
    connector.Clear();
  }
  CallFixture(const CallFixture&) = delete;
  CallFixture& operator=(const CallFixture&) = delete;

  /// Starts ProxyRequest for a request to `target` (chat by default) with
  /// `body_json`.
  void Start(std::string_view body_json, std::string_view target = "/v1/chat/completions") {
    req.method(http::verb::post);
    req.target(target);
    req.version(11);
    req.set(http::field::host, "gw");
    req.set(http::field::content_type, "application/json");
    req.body().assign(body_json.data(), body_json.size());
    req.prepare_payload();
    body.emplace(RequestBody::Parse(std::string_view(req.body().data(), req.body().size())));
    REQUIRE(body->facts().status == BodyFacts::Status::kOk);
    ctx.emplace(*session, worker.CurrentRuntime(), req);
    ctx->request_id.assign("req-1");
    ctx->path = req.target();
    ctx->stream = body->facts().stream;
    ctx->include_usage = body->facts().include_usage;
    std::optional<size_t> model = ctx->cfg.FindModel(body->facts().model);
    REQUIRE(model);
    ctx->model = *model;
    ctx->residency = routing::DecideResidency(ctx->cfg, routing::GeoInfo{}, nullptr, {});
    ctx->residency_decided = true;
    if (client_ip) {  // as ResolveGeo leaves them
      ctx->client_ip = *client_ip;
      ctx->client_ip_text = client_ip->ToString();
    }
    net::co_spawn(worker.ioc(),
                  ProxyRequest(*ctx, common::MakePooled<RequestBody>(std::move(*body))),
                  [this](std::exception_ptr e, bool keep) {
                    if (e) std::rethrow_exception(e);
                    done = true;
                    keep_alive = keep;
                  });
    RunReady();
  }

  /// Runs what is ready on the worker until nothing is (simulated time
  /// does not move, so only I/O the test streams complete makes progress).
  void RunReady() {
    for (int i = 0; i < 1000; ++i) {
      worker.ioc().restart();
      if (worker.ioc().poll() == 0) return;
    }
  }

  /// Moves simulated time on by `d` (firing the deadlines due), then runs
  /// what that made ready.
  void Advance(health::Millis d) {
    sim.advance(d);
    RunReady();
  }

  /// The index of backend `name`.
  size_t IndexOf(std::string_view name) const { return name == "b0" ? 0 : 1; }

  /// What the client received.
  std::string ClientGot() const { return client.str(); }

  health::SimulatedTime sim;
  ServerShared shared;
  ScriptedConnector connector;
  Worker worker{0, shared, sim, &sim, &connector};
  test::stream client{worker.ioc()};
  std::optional<Session> session;
  Request req;
  std::optional<RequestBody> body;
  std::optional<RequestContext> ctx;
  /// The client's address as ResolveGeo found it, set before Start; by
  /// default none was resolved.
  std::optional<routing::IpAddr> client_ip;
  bool done = false;
  bool keep_alive = false;
};

/// The X-Forwarded-For field of what the gateway sent the backend first.
std::string ForwardedFor(const CallFixture& f) {
  REQUIRE_FALSE(f.connector.ends.empty());
  std::string sent = f.connector.ends.front().remote->str();
  std::string lower = sent;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  constexpr std::string_view kField = "\r\nx-forwarded-for: ";
  size_t at = lower.find(kField);
  if (at == std::string::npos) return {};
  at += kField.size();
  return sent.substr(at, sent.find("\r\n", at) - at);
}

}  // namespace

TEST_CASE("proxy call: a stale pooled connection is retried on a fresh one", "[proxy_call]") {
  CallFixture f;
  // Each backend has a kept connection its backend has closed meanwhile;
  // the one the call takes fails on first use with no response byte.
  f.connector.AddStaleIdle("b0");
  f.connector.AddStaleIdle("b1");
  f.connector.steps.push_back(ConnectStep::Serve(std::string(kOk)));
  f.Start(R"({"model":"m","messages":[]})");
  REQUIRE(f.done);
  // A new connection to the same backend, within the same attempt: not a
  // failover, and not the backend's fault.
  REQUIRE(f.connector.connects.size() == 1);
  CHECK(f.ctx->attempts == 1);
  CHECK(f.ctx->status == 200);
  CHECK(f.ctx->backend == (f.connector.connects[0] == "b0" ? 0u : 1u));
  std::string got = f.ClientGot();
  CHECK(got.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(got.ends_with("{\"answer\":42}"));
  CHECK(f.keep_alive);
  // The fresh connection got the request and went back to the pool.
  CHECK(f.connector.ends.back().remote->str().starts_with("POST /v1/chat/completions HTTP/1.1"));
  CHECK(f.connector.released == 1);
}

// After a first attempt that failed: the second connect went to another
// candidate, which served the client's 200. @return what the client got.
static std::string CheckServedBySecondCandidate(CallFixture& f) {
  REQUIRE(f.done);
  REQUIRE(f.connector.connects.size() == 2);
  CHECK(f.connector.connects[0] != f.connector.connects[1]);
  CHECK(f.ctx->attempts == 2);
  CHECK(f.ctx->status == 200);
  CHECK(f.ctx->backend == f.IndexOf(f.connector.connects[1]));
  std::string got = f.ClientGot();
  CHECK(got.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(got.ends_with("{\"answer\":42}"));
  return got;
}

TEST_CASE("proxy call: a refused connect fails over to the next candidate", "[proxy_call]") {
  CallFixture f;
  f.connector.steps.push_back(ConnectStep::Refuse());
  f.connector.steps.push_back(ConnectStep::Serve(std::string(kOk)));
  f.Start(R"({"model":"m","messages":[]})");
  CheckServedBySecondCandidate(f);
}

TEST_CASE("proxy call: a 5xx from the first backend is retried on the next", "[proxy_call]") {
  CallFixture f;
  f.connector.steps.push_back(
      ConnectStep::Serve("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"));
  f.connector.steps.push_back(ConnectStep::Serve(std::string(kOk)));
  f.Start(R"({"model":"m","messages":[]})");
  std::string got = CheckServedBySecondCandidate(f);
  CHECK(got.find("busy") == std::string::npos);  // the 503's body never reaches the client
}

namespace {

std::string SseHead() {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
         "Transfer-Encoding: chunked\r\n\r\n";
}

// `data` as one chunk of a chunked body.
std::string Chunk(std::string_view data) {
  char size[16];
  auto n = static_cast<size_t>(std::snprintf(size, sizeof size, "%zx\r\n", data.size()));
  return std::string(size, n) + std::string(data) + "\r\n";
}

// One chunk of an SSE body holding a token event.
std::string TokenChunk(std::string_view token) {
  std::string event = "data: {\"choices\":[{\"delta\":{\"content\":\"";
  event += token;
  event += "\"}}]}\n\n";
  return Chunk(event);
}

// A streamed chat request whose backend sends its head and the token
// `first`, then keeps generating (nothing more yet). @return the backend's
// end of the connection.
test::stream& StartStream(CallFixture& f, std::string_view first) {
  f.connector.steps.push_back(ConnectStep::Serve(SseHead() + TokenChunk(first)));
  f.Start(R"({"model":"m","messages":[],"stream":true})");
  REQUIRE_FALSE(f.done);
  REQUIRE(f.connector.ends.size() == 1);
  return *f.connector.ends[0].remote;
}

size_t Count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("proxy call: a mid-stream failure ends the stream with one error event, no [DONE]",
          "[proxy_call]") {
  CallFixture f;
  // Two tokens, then the backend goes away inside the chunked body.
  f.connector.steps.push_back(
      ConnectStep::Serve(SseHead() + TokenChunk("Hel") + TokenChunk("lo"), /*close_after=*/true));
  f.Start(R"({"model":"m","messages":[],"stream":true})");
  REQUIRE(f.done);
  CHECK(f.connector.connects.size() == 1);  // committed: never retried
  CHECK(f.ctx->outcome == RequestOutcome::kInterrupted);
  CHECK_FALSE(f.keep_alive);
  std::string got = f.ClientGot();
  CHECK(got.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(got.find("\"Hel\"") != std::string::npos);
  CHECK(got.find("\"lo\"") != std::string::npos);
  CHECK(Count(got, "stream_interrupted") == 1);
  CHECK(Count(got, "[DONE]") == 0);
  CHECK(got.ends_with("\r\n0\r\n\r\n"));  // a clean end of the chunked body
}

TEST_CASE("proxy call: a stream waiting for its next token holds no relay buffer", "[proxy_call]") {
  CallFixture f;
  test::stream& backend = StartStream(f, "Hel");
  CHECK(f.ClientGot().find("\"Hel\"") != std::string::npos);
  // Relayed, and waiting for the backend: the 16 KiB buffer is in the pool.
  CHECK(f.worker.relay_buffers().idle() == 1);
  net::write(backend, net::buffer(TokenChunk("lo") + TokenChunk("!") + "0\r\n\r\n"));
  f.RunReady();
  REQUIRE(f.done);
  std::string got = f.ClientGot();
  CHECK(got.find("\"lo\"") != std::string::npos);
  CHECK(got.find("\"!\"") != std::string::npos);
  CHECK(got.ends_with("\r\n0\r\n\r\n"));
  CHECK(f.worker.relay_buffers().idle() == 1);
}

TEST_CASE("proxy call: an attempt waiting for its first token holds no relay buffer",
          "[proxy_call]") {
  CallFixture f;
  // The head without a body byte: a prefill that may take seconds. The
  // relay buffer is taken to look for body bytes and given back at once.
  f.connector.steps.push_back(ConnectStep::Serve(SseHead()));
  f.Start(R"({"model":"m","messages":[],"stream":true})");
  REQUIRE_FALSE(f.done);
  REQUIRE(f.connector.ends.size() == 1);
  CHECK(f.worker.relay_buffers().idle() == 1);
  test::stream& backend = *f.connector.ends[0].remote;
  net::write(backend, net::buffer(TokenChunk("Hel") + "0\r\n\r\n"));
  f.RunReady();
  REQUIRE(f.done);
  CHECK(f.ClientGot().find("\"Hel\"") != std::string::npos);
  CHECK(f.worker.relay_buffers().idle() == 1);
}

TEST_CASE("proxy call: a stream counts against its backend's in-flight total until it ends",
          "[proxy_call]") {
  CallFixture f;
  test::stream& backend = StartStream(f, "Hel");
  const auto& backends = f.ctx->rt.backends;
  int64_t inflight = 0;
  for (const auto& state : backends)
    inflight += state->inflight.load();
  CHECK(inflight == 1);  // relaying: Attempt has returned, its count has not
  net::write(backend, net::buffer(TokenChunk("lo") + "0\r\n\r\n"));
  f.RunReady();
  REQUIRE(f.done);
  for (const auto& state : backends)
    CHECK(state->inflight.load() == 0);
  CHECK(f.connector.released == 1);  // the connection went back to the pool
}

TEST_CASE("proxy call: a long stream's token gaps reach the histogram in batches", "[proxy_call]") {
  // The observer holds at most a batch of gaps, not one per token for the
  // stream's life: full batches go to the histogram as the stream flows,
  // the rest when it ends.
  CallFixture f;
  test::stream& backend = StartStream(f, "t");
  auto gaps = [&] {
    uint64_t count = 0;
    double sum = 0;
    for (const auto& [labels, d] : f.worker.metrics().token_gap.values()) {
      CAPTURE(labels[0], d.count, d.sum);
      CHECK(labels[0] == f.connector.ends[0].backend);  // the one serving the stream
      count += d.count;
      sum += d.sum;
    }
    return std::pair(count, sum);
  };
  constexpr size_t kTokens = 40;  // 39 gaps of 2 ms: two full batches, 7 at the end
  for (size_t i = 1; i < kTokens; ++i) {
    f.Advance(health::Millis(2));
    net::write(backend, net::buffer(TokenChunk("t")));
    f.RunReady();
  }
  REQUIRE_FALSE(f.done);
  // (It failed once, unreproduced, in a loaded ctest run: what the client
  // got says how far the stream came.)
  INFO("client got: " << f.ClientGot());
  CHECK(gaps().first == 2 * SseObserver::kGapBatch);
  net::write(backend, net::buffer(std::string("0\r\n\r\n")));
  f.RunReady();
  REQUIRE(f.done);
  auto [count, sum] = gaps();
  CHECK(count == kTokens - 1);
  CHECK(sum == Approx(0.002 * (kTokens - 1)));
}

TEST_CASE("proxy call: a trickling stream waits with a small read buffer, a burst gets a full one",
          "[proxy_call]") {
  CallFixture f;
  test::stream& backend = StartStream(f, "a");
  UpstreamConn& conn = *f.connector.last_conn;
  // Waiting for its second token: the 16 KiB read buffer is gone (what is
  // left is room for a small read beside the last chunk's CRLF).
  CHECK(conn.buffer.capacity() < 2 * kUpstreamTrickleReadBytes);
  net::write(backend, net::buffer(TokenChunk("b")));
  f.RunReady();
  CHECK(conn.buffer.capacity() < 2 * kUpstreamTrickleReadBytes);
  // A burst larger than the small read: the small read fills, the next
  // read is a full one and takes the rest at once.
  std::string burst;
  for (int i = 0; i < 40; ++i)
    burst += TokenChunk("c" + std::to_string(i));
  REQUIRE(burst.size() > 2 * kUpstreamTrickleReadBytes);
  net::write(backend, net::buffer(burst));
  f.RunReady();
  REQUIRE_FALSE(f.done);
  CHECK(conn.buffer.capacity() >= kUpstreamReadBytes);
  // Bytes queued up once: single tokens are read full-size for a while
  // (a stream whose reads alternate between backlog and one token does not
  // swap buffers on every read), and it trickles again after
  // kSmallReadsToTrickle of them.
  for (uint32_t i = 1; i < geogate::proxy::kSmallReadsToTrickle; ++i) {
    net::write(backend, net::buffer(TokenChunk("d" + std::to_string(i))));
    f.RunReady();
    CHECK(conn.buffer.capacity() >= kUpstreamReadBytes);
  }
  net::write(backend, net::buffer(TokenChunk("e")));
  f.RunReady();
  CHECK(conn.buffer.capacity() < 2 * kUpstreamTrickleReadBytes);
  net::write(backend, net::buffer(TokenChunk("z") + "0\r\n\r\n"));
  f.RunReady();
  REQUIRE(f.done);
  std::string got = f.ClientGot();
  // Every token reached the client, in order.
  size_t at = got.find("\"a\"");
  REQUIRE(at != std::string::npos);
  for (std::string t : {"b", "c0", "c17", "c39", "d1", "d7", "e", "z"}) {
    size_t next = got.find("\"" + t + "\"", at);
    CHECK(next != std::string::npos);
    if (next != std::string::npos) at = next;
  }
  CHECK(got.ends_with("\r\n0\r\n\r\n"));
}

TEST_CASE("proxy call: a client that disconnects cancels the upstream request", "[proxy_call]") {
  CallFixture f;
  // The backend streams one token, then keeps generating (nothing more yet).
  test::stream& backend = StartStream(f, "Hel");
  CHECK(f.ClientGot().find("\"Hel\"") != std::string::npos);
  REQUIRE(f.connector.ends.size() == 1);

  f.Advance(health::Millis(500));  // generating, for a client about to leave
  f.client.close();
  f.RunReady();
  REQUIRE(f.done);
  CHECK(f.ctx->outcome == RequestOutcome::kClientClosed);
  CHECK_FALSE(f.keep_alive);
  CHECK(f.connector.released == 0);
  // The GPU worked for the client until it left: showback charges it.
  REQUIRE(f.ctx->usage);
  CHECK(f.ctx->usage->completion_tokens == 1);
  CHECK(f.ctx->usage->gpu_seconds > 0);
  // The backend sees its connection closed: it can stop generating.
  backend.clear();  // the request it was sent
  std::optional<boost::system::error_code> read;
  char byte = 0;
  backend.async_read_some(net::buffer(&byte, 1),
                          [&](boost::system::error_code ec, size_t) { read = ec; });
  f.RunReady();
  REQUIRE(read.has_value());
  CHECK(*read == net::error::eof);
}

// geogate_failovers_total{reason} of the fixture's worker.
static double Failovers(CallFixture& f, std::string_view reason) {
  const auto& values = f.worker.metrics().failovers.values();
  auto it = values.find(LabelView<1>{reason});
  return it == values.end() ? 0 : it->second;
}

TEST_CASE(
    "proxy call: a backend that stalls before its first token is left at "
    "first_token_timeout_ms for the next",
    "[proxy_call]") {
  CallFixture f("[gateway.upstream]\nfirst_token_timeout_ms = 2000\n");
  f.connector.steps.push_back(ConnectStep::Serve(""));  // takes the request, never answers
  f.connector.steps.push_back(ConnectStep::Serve(std::string(kOk)));
  f.Start(R"({"model":"m","messages":[]})");
  REQUIRE_FALSE(f.done);
  f.Advance(health::Millis(1999));
  CHECK_FALSE(f.done);  // prefill may take that long: still waiting
  CHECK(f.connector.connects.size() == 1);
  f.Advance(health::Millis(1));
  CheckServedBySecondCandidate(f);
  CHECK(Failovers(f, "first_token_timeout") == 1);
}

TEST_CASE("proxy call: a reset after the head, before the first token, is retried unseen",
          "[proxy_call]") {
  CallFixture f;
  // A 200 stream head, then the backend dies before any body byte: the
  // client has seen nothing yet, so another backend may still answer.
  f.connector.steps.push_back(ConnectStep::Serve(SseHead(), /*close_after=*/true));
  f.connector.steps.push_back(ConnectStep::Serve(std::string(kOk)));
  f.Start(R"({"model":"m","messages":[],"stream":true})");
  std::string got = CheckServedBySecondCandidate(f);
  CHECK(Count(got, "HTTP/1.1 ") == 1);  // one head: the second backend's
  CHECK(got.find("text/event-stream") == std::string::npos);
  CHECK(Failovers(f, "reset") == 1);
}

TEST_CASE("proxy call: a stream silent for stream_idle_timeout_ms is interrupted", "[proxy_call]") {
  CallFixture f("[gateway.upstream]\nstream_idle_timeout_ms = 5000\n");
  StartStream(f, "Hel");
  f.Advance(health::Millis(4999));
  CHECK_FALSE(f.done);
  f.Advance(health::Millis(1));
  REQUIRE(f.done);
  CHECK(f.ctx->outcome == RequestOutcome::kInterrupted);
  CHECK(f.ctx->upstream_error == "stream_idle");
  std::string got = f.ClientGot();
  CHECK(got.find("\"Hel\"") != std::string::npos);
  CHECK(Count(got, "stream_interrupted") == 1);
  CHECK(Count(got, "[DONE]") == 0);
}

namespace {

// One Responses API event, framed as OpenAI sends it.
std::string ResponsesEvent(std::string_view type, std::string_view rest) {
  std::string t(type);
  return "event: " + t + "\ndata: {\"type\":\"" + t + "\"" + std::string(rest) + "}\n\n";
}

}  // namespace

TEST_CASE("proxy call: a Responses stream is accounted from its own events", "[proxy_call]") {
  CallFixture f;
  // The backend answers at once with the opening events (no token yet).
  std::string opening = ResponsesEvent("response.created",
                                       ",\"response\":{\"status\":\"in_progress\",\"usage\":null,"
                                       "\"text\":{\"format\":{\"type\":\"text\"}}}") +
                        ResponsesEvent("response.content_part.added",
                                       ",\"part\":{\"type\":\"output_text\",\"text\":\"\"}");
  f.connector.steps.push_back(ConnectStep::Serve(SseHead() + Chunk(opening)));
  f.Start(R"({"model":"m","input":"hi","stream":true})", "/v1/responses");
  REQUIRE_FALSE(f.done);
  REQUIRE(f.connector.ends.size() == 1);
  test::stream& backend = *f.connector.ends[0].remote;
  // The Responses API has no stream_options.include_usage (OpenAI refuses
  // unknown parameters): the body goes upstream as the client sent it.
  std::string sent = std::string(backend.str());
  CHECK(sent.find("stream_options") == std::string::npos);
  CHECK(sent.ends_with(R"({"model":"m","input":"hi","stream":true})"));
  CHECK(f.ClientGot().find("response.created") != std::string::npos);
  CHECK(f.ctx->ttft_ms < 0);  // the opening events are not a first token

  // 40 ms later the first output delta, then one more and the end.
  f.sim.advance(health::Millis(40));
  std::string deltas = ResponsesEvent("response.output_text.delta", ",\"delta\":\"a \"") +
                       ResponsesEvent("response.output_text.delta", ",\"delta\":\"b \"");
  net::write(backend, net::buffer(Chunk(deltas)));
  f.RunReady();
  CHECK(f.ctx->ttft_ms == Approx(40.0));
  size_t b = f.ctx->backend;
  REQUIRE(b < 2);
  CHECK(f.ctx->rt.backends[b]->ttft_ewma_us.load() == 40000);

  f.sim.advance(health::Millis(10));
  std::string completed = ResponsesEvent(
      "response.completed",
      ",\"response\":{\"status\":\"completed\",\"output\":[{\"content\":[{\"text\":\"a b \"}]}],"
      "\"usage\":{\"input_tokens\":7,\"output_tokens\":2,\"total_tokens\":9}}");
  net::write(backend, net::buffer(Chunk(completed) + "0\r\n\r\n"));
  f.RunReady();
  REQUIRE(f.done);
  CHECK(f.ctx->ttft_ms == Approx(40.0));  // not moved by later events
  REQUIRE(f.ctx->usage);
  CHECK(f.ctx->usage->prompt_tokens == 7);
  CHECK(f.ctx->usage->completion_tokens == 2);
  CHECK_FALSE(f.ctx->usage->estimated);
  std::string got = f.ClientGot();
  CHECK(got.find("response.completed") != std::string::npos);  // nothing stripped
  CHECK(got.find("\"input_tokens\":7") != std::string::npos);
}

TEST_CASE("proxy call: a Responses stream failing mid-way ends with the API's own error event",
          "[proxy_call]") {
  CallFixture f;
  // The opening event and one delta, then the backend goes away.
  std::string events =
      ResponsesEvent("response.created", ",\"sequence_number\":0,\"response\":{\"usage\":null}") +
      ResponsesEvent("response.output_text.delta", ",\"sequence_number\":1,\"delta\":\"a \"");
  f.connector.steps.push_back(ConnectStep::Serve(SseHead() + Chunk(events), /*close_after=*/true));
  f.Start(R"({"model":"m","input":"hi","stream":true})", "/v1/responses");
  REQUIRE(f.done);
  CHECK(f.connector.connects.size() == 1);  // committed: never retried
  CHECK(f.ctx->outcome == RequestOutcome::kInterrupted);
  std::string got = f.ClientGot();
  CHECK(Count(got, "stream_interrupted") == 1);
  CHECK(Count(got, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":2,") == 1);
  CHECK(Count(got, "response.completed") == 0);
  CHECK(Count(got, "[DONE]") == 0);
  CHECK(got.ends_with("\r\n0\r\n\r\n"));  // a clean end of the chunked body
}

namespace {

// The body of the HTTP/1.1 response in `got`, its chunked framing removed.
std::string Dechunk(std::string_view got) {
  size_t at = got.find("\r\n\r\n");
  REQUIRE(at != std::string_view::npos);
  at += 4;
  std::string body;
  for (;;) {
    size_t line = got.find("\r\n", at);
    REQUIRE(line != std::string_view::npos);
    size_t size = std::stoul(std::string(got.substr(at, line - at)), nullptr, 16);
    if (size == 0) return body;
    body.append(got.substr(line + 2, size));
    at = line + 2 + size + 2;
  }
}

// The data of each event in an SSE body, as an SSE client dispatches them
// (lines joined by '\n'); an unfinished event at the end is not one.
std::vector<std::string> SseData(std::string_view body) {
  std::vector<std::string> events;
  size_t at = 0;
  for (size_t end = body.find("\n\n"); end != std::string_view::npos;
       at = end + 2, end = body.find("\n\n", at)) {
    std::string data;
    std::string_view event = body.substr(at, end - at);
    for (size_t from = 0; from <= event.size();) {
      size_t eol = std::min(event.find('\n', from), event.size());
      std::string_view line = event.substr(from, eol - from);
      from = eol + 1;
      if (!line.starts_with("data:")) continue;
      line.remove_prefix(line.starts_with("data: ") ? 6 : 5);
      if (!data.empty()) data += '\n';
      data.append(line);
    }
    events.push_back(std::move(data));
  }
  return events;
}

}  // namespace

TEST_CASE("proxy call: a backend dying inside an event sends no half event before the error",
          "[proxy_call]") {
  // The client receives only whole events: the error event starts on a
  // fresh event, not glued to the bytes of one that never ended (an SSE
  // client would join the two into one event of broken JSON and lose the
  // error). The streams that pass events through untouched are the ones
  // at risk: a chat client asking for usage, and the Responses API.
  CallFixture f;
  std::string half;
  SECTION("chat, usage asked for") {
    half = "data: {\"choices\":[{\"delta\":{\"content\":\"wor";
    f.connector.steps.push_back(ConnectStep::Serve(SseHead() + TokenChunk("Hel") + Chunk(half),
                                                   /*close_after=*/true));
    f.Start(R"({"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}})");
  }
  SECTION("Responses") {
    half = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.de";
    std::string events =
        ResponsesEvent("response.created", ",\"sequence_number\":0,\"response\":{\"usage\":null}");
    f.connector.steps.push_back(
        ConnectStep::Serve(SseHead() + Chunk(events) + Chunk(half), /*close_after=*/true));
    f.Start(R"({"model":"m","input":"hi","stream":true})", "/v1/responses");
  }
  REQUIRE(f.done);
  CHECK(f.ctx->outcome == RequestOutcome::kInterrupted);
  std::string got = f.ClientGot();
  std::string body = Dechunk(got);
  CHECK(body.find(half) == std::string::npos);
  std::vector<std::string> events = SseData(body);
  REQUIRE(events.size() == 2);
  for (const std::string& data : events) {
    boost::system::error_code ec;
    boost::json::parse(data, ec);
    CHECK_FALSE(ec);  // each event's data is whole JSON
  }
  CHECK(Count(events.back(), "stream_interrupted") == 1);
  CHECK(body.ends_with("\n\n"));
}

TEST_CASE("proxy call: a backend dying inside an unfinished 'event' over 1 MiB cuts the body",
          "[proxy_call]") {
  // Past 1 MiB the unfinished event is not held (not SSE after all): the
  // client already has part of it, so an error event would be read as its
  // rest. The body is cut instead, like any non-SSE body.
  CallFixture f;
  std::string big = "data: " + std::string((1 << 20) + 100, 'x');
  f.connector.steps.push_back(ConnectStep::Serve(SseHead() + TokenChunk("Hel") + Chunk(big),
                                                 /*close_after=*/true));
  f.Start(R"({"model":"m","messages":[],"stream":true})");
  REQUIRE(f.done);
  CHECK(f.ctx->outcome == RequestOutcome::kInterrupted);
  std::string got = f.ClientGot();
  CHECK(got.find("\"Hel\"") != std::string::npos);
  CHECK(got.find(std::string(1000, 'x')) != std::string::npos);
  CHECK(Count(got, "stream_interrupted") == 0);
  CHECK_FALSE(got.ends_with("\r\n0\r\n\r\n"));  // no clean end: the client sees a cut body
}

TEST_CASE("proxy call: an encoded stream passes as it comes, unread, and is cut when it breaks",
          "[proxy_call]") {
  // The gateway asks for identity, but a backend may encode anyway. Its
  // bytes have no event boundaries to wait for: holding them until one
  // came buffered the whole stream, and an error event appended would be
  // plain text inside a gzip stream.
  CallFixture f;
  const std::string gz = std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8) + "encoded tokens";
  f.connector.steps.push_back(
      ConnectStep::Serve("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" +
                             Chunk(gz),
                         /*close_after=*/true));
  f.Start(R"({"model":"m","messages":[],"stream":true})");
  REQUIRE(f.done);
  REQUIRE(f.connector.ends.size() == 1);
  std::string sent = std::string(f.connector.ends[0].remote->str());
  std::transform(sent.begin(), sent.end(), sent.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  CHECK(sent.find("\r\naccept-encoding: identity\r\n") != std::string::npos);
  CHECK(f.ctx->outcome == RequestOutcome::kInterrupted);
  std::string got = f.ClientGot();
  CHECK(got.find("Content-Encoding: gzip") != std::string::npos);
  CHECK(got.find(gz) != std::string::npos);  // relayed, not held
  CHECK(Count(got, "stream_interrupted") == 0);
  CHECK_FALSE(got.ends_with("\r\n0\r\n\r\n"));  // cut: no clean end
}

TEST_CASE("proxy call: a stream that comes whole with its head still loses the usage chunk",
          "[proxy_call]") {
  // One backend write, read at once: the body is complete in the first read.
  // It used to go out with a Content-Length, byte for byte, so the usage
  // chunk the gateway asked for reached a client that had not.
  CallFixture f;
  const std::string usage =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n";
  f.connector.steps.push_back(ConnectStep::Serve(SseHead() + TokenChunk("Hel") + TokenChunk("lo") +
                                                 Chunk(usage) + Chunk("data: [DONE]\n\n") +
                                                 "0\r\n\r\n"));
  f.Start(R"({"model":"m","messages":[],"stream":true})");
  REQUIRE(f.done);
  std::string got = f.ClientGot();
  CHECK(got.find("\"usage\"") == std::string::npos);
  CHECK(got.find("\"Hel\"") != std::string::npos);
  CHECK(Count(got, "[DONE]") == 1);
  CHECK(got.ends_with("\r\n0\r\n\r\n"));
  REQUIRE(f.ctx->usage);
  CHECK(f.ctx->usage->prompt_tokens == 5);
  CHECK(f.ctx->usage->completion_tokens == 2);
  CHECK_FALSE(f.ctx->usage->estimated);
}

TEST_CASE("proxy call: a chat stream still asks the backend for its usage chunk", "[proxy_call]") {
  CallFixture f;
  f.connector.steps.push_back(ConnectStep::Serve(SseHead() + TokenChunk("Hel")));
  f.Start(R"({"model":"m","messages":[],"stream":true})");
  REQUIRE(f.connector.ends.size() == 1);
  CHECK(std::string(f.connector.ends[0].remote->str())
            .find(R"("stream_options":{"include_usage":true})") != std::string::npos);
  CHECK(f.ctx->ttft_ms >= 0);  // the first body byte is the first token
}

TEST_CASE("proxy call: a Responses answer in JSON is read as one, TTFT at its first byte",
          "[proxy_call]") {
  CallFixture f;
  // Asked to stream, the backend answers with the whole Response object.
  std::string body =
      R"({"object":"response","output":[],"usage":{"input_tokens":3,"output_tokens":4}})";
  f.connector.steps.push_back(
      ConnectStep::Serve("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
  f.Start(R"({"model":"m","input":"hi","stream":true})", "/v1/responses");
  REQUIRE(f.done);
  CHECK(f.ctx->ttft_ms >= 0);  // no delta will ever come: the first byte is it
  REQUIRE(f.ctx->usage);
  CHECK(f.ctx->usage->prompt_tokens == 3);
  CHECK(f.ctx->usage->completion_tokens == 4);
  CHECK(f.ClientGot().ends_with(body));
}

namespace {
// Every backend of the fixture holds as many streams as it takes.
void FillBackends(CallFixture& f, int64_t inflight) {
  for (const auto& state : (*f.worker.CurrentRuntime())->backends)
    state->inflight.store(inflight, std::memory_order_relaxed);
}
}  // namespace

TEST_CASE("proxy call: a request queued for capacity gets 429 at queue_timeout_ms",
          "[proxy_call]") {
  CallFixture f("[routing]\nqueue_timeout_ms = 500\n");
  FillBackends(f, 64);  // the default capacity
  f.Start(R"({"model":"m","messages":[]})");
  REQUIRE_FALSE(f.done);  // queued, in simulated time
  f.Advance(health::Millis(495));
  CHECK_FALSE(f.done);
  CHECK(f.connector.connects.empty());
  f.Advance(health::Millis(10));
  REQUIRE(f.done);
  CHECK(f.ctx->status == 429);
  CHECK(f.ClientGot().find("capacity_exhausted") != std::string::npos);
  FillBackends(f, 0);
}

TEST_CASE("proxy call: a request queued for capacity is served when room frees up",
          "[proxy_call]") {
  CallFixture f("[routing]\nqueue_timeout_ms = 500\n");
  FillBackends(f, 64);
  f.connector.steps.push_back(ConnectStep::Serve(std::string(kOk)));
  f.Start(R"({"model":"m","messages":[]})");
  f.Advance(health::Millis(200));
  REQUIRE_FALSE(f.done);
  FillBackends(f, 0);  // streams elsewhere ended
  f.Advance(health::Millis(5));
  REQUIRE(f.done);
  CHECK(f.ctx->status == 200);
  CHECK(f.connector.connects.size() == 1);
}

// retry_deadline_ms bounds retries only (docs/configuration.md): a request
// that waited in the capacity queue past it still gets its first attempt
// at the slot it waited for.
TEST_CASE("proxy call: a request queued past retry_deadline_ms still makes its first attempt",
          "[proxy_call]") {
  CallFixture f(
      "[routing]\nqueue_timeout_ms = 500\n"
      "[gateway.upstream]\nretry_deadline_ms = 100\n");
  FillBackends(f, 64);
  f.connector.steps.push_back(ConnectStep::Serve(std::string(kOk)));
  f.Start(R"({"model":"m","messages":[]})");
  f.Advance(health::Millis(200));
  REQUIRE_FALSE(f.done);
  FillBackends(f, 0);
  f.Advance(health::Millis(5));
  REQUIRE(f.done);
  CHECK(f.ctx->attempts == 1);
  CHECK(f.ctx->status == 200);
  CHECK(f.connector.connects.size() == 1);
}

TEST_CASE("proxy call: X-Forwarded-For ends with the connection's own address", "[proxy_call]") {
  // The peer is 127.0.0.1. Whether the client's address is the peer's (its
  // text reused) or one a trusted proxy named (the peer's written anew),
  // the backend learns who connected.
  std::optional<routing::IpAddr> client =
      GENERATE(std::optional<routing::IpAddr>{},
               std::optional<routing::IpAddr>{routing::IpAddr::FromV4(0x7f000001)},
               std::optional<routing::IpAddr>{*routing::IpAddr::Parse("203.0.113.9")},
               std::optional<routing::IpAddr>{*routing::IpAddr::Parse("2001:db8::7")});
  CallFixture f;
  f.client_ip = client;
  f.connector.steps.push_back(ConnectStep::Serve(std::string(kOk)));
  if (client && !(*client == routing::IpAddr::FromV4(0x7f000001)))
    f.req.set("X-Forwarded-For", client->ToString());
  f.Start(R"({"model":"m","messages":[]})");
  REQUIRE(f.done);
  std::string expected = client && !(*client == routing::IpAddr::FromV4(0x7f000001))
                             ? client->ToString() + ", 127.0.0.1"
                             : "127.0.0.1";
  CHECK(ForwardedFor(f) == expected);
}
