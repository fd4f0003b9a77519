// The one loopback test of health/: HttpProbeClient (and HealthService on top
// of it) against a tiny in-test HTTP server on 127.0.0.1, port 0. Real time,
// but every wait is bounded and driven by completions, never by sleeps.
#include "health/http_probe_client.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>

#include "health/health_service.h"
#include "health/health_table.h"
#include "test_support.h"
#include "testing/held_lookup.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using namespace geogate::health;
using namespace std::chrono_literals;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// A self-signed certificate for "localhost" and 127.0.0.1, made in memory.
struct TestCert {
  TestCert() {
    key = EVP_EC_gen("P-256");
    cert = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    X509_EXTENSION* san =
        X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
    X509_add_ext(cert, san, -1);
    X509_EXTENSION_free(san);
    X509_sign(cert, key, EVP_sha256());
    path = (std::filesystem::temp_directory_path() /
            ("geogate-health-test-ca-" + std::to_string(::getpid()) + ".pem"))
               .string();
    FILE* f = std::fopen(path.c_str(), "w");
    PEM_write_X509(f, cert);
    std::fclose(f);
  }
  ~TestCert() {
    std::filesystem::remove(path);
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  std::string path;
};

// A small HTTP/1.1 server with switchable behaviour, on the test's io_context.
class TestServer {
 public:
  enum class Mode {
    kOk,          // 200 with a JSON load report (and vLLM metrics on /metrics)
    kError,       // 500
    kSilent,      // accepts, never reads or answers
    kCloseAfter,  // answers, then closes the connection without saying so
  };

  TestServer(asio::io_context& io, TestCert* tls = nullptr)
      : io_(io), acceptor_(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {
    port = acceptor_.local_endpoint().port();
    if (tls != nullptr) {
      tls_ctx_.emplace(ssl::context::tls_server);
      SSL_CTX_use_certificate(tls_ctx_->native_handle(), tls->cert);
      SSL_CTX_use_PrivateKey(tls_ctx_->native_handle(), tls->key);
    }
    asio::co_spawn(io_, acceptLoop(), asio::detached);
  }
  ~TestServer() { close(); }
  void close() {
    beast::error_code ec;
    acceptor_.close(ec);
    for (auto& s : held_)
      s->close(ec);
    held_.clear();
  }

  uint16_t port = 0;
  Mode mode = Mode::kOk;
  int accepted = 0;
  std::vector<std::string> targets;
  std::vector<std::string> hosts;
  std::vector<std::string> sni;

 private:
  asio::awaitable<void> acceptLoop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(kTuple);
      if (ec) co_return;
      ++accepted;
      if (mode == Mode::kSilent) {
        held_.push_back(std::make_shared<tcp::socket>(std::move(socket)));
        continue;
      }
      asio::co_spawn(io_, session(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> session(tcp::socket socket) {
    if (!tls_ctx_) {
      co_await serve(socket);
      co_return;
    }
    ssl::stream<tcp::socket> stream(std::move(socket), *tls_ctx_);
    auto [ec] = co_await stream.async_handshake(ssl::stream_base::server, kTuple);
    if (ec) co_return;
    const char* name = SSL_get_servername(stream.native_handle(), TLSEXT_NAMETYPE_host_name);
    sni.push_back(name != nullptr ? name : "");
    co_await serve(stream);
  }

  template <class Stream>
  asio::awaitable<void> serve(Stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      auto [ec, n] = co_await http::async_read(stream, buffer, req, kTuple);
      if (ec) co_return;
      targets.emplace_back(req.target());
      hosts.emplace_back(req[http::field::host]);
      http::response<http::string_body> res{
          mode == Mode::kError ? http::status::internal_server_error : http::status::ok,
          req.version()};
      if (req.target().ends_with("/metrics")) {
        res.body() =
            "# TYPE vllm:num_requests_running gauge\n"
            "vllm:num_requests_running{model_name=\"m\"} 11.0\n"
            "vllm:num_requests_waiting{model_name=\"m\"} 4.0\n"
            "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.75\n";
      } else {
        res.body() = R"({"status":"ok","queue_depth":2,"inflight":5,"kv_cache_utilization":0.5})";
      }
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      auto [wec, wn] = co_await http::async_write(stream, res, kTuple);
      if (wec || !req.keep_alive() || mode == Mode::kCloseAfter) co_return;
    }
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  std::optional<ssl::context> tls_ctx_;
  std::vector<std::shared_ptr<tcp::socket>> held_;
};

// Runs the io_context until the probe answers (bounded).
ProbeResult RunProbe(asio::io_context& io, ProbeClient& client,
                     std::chrono::milliseconds limit = 10s) {
  std::optional<ProbeResult> got;
  client.probe([&](const ProbeResult& r) { got = r; });
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!got && std::chrono::steady_clock::now() < end) {
    if (io.stopped()) io.restart();
    io.run_one_for(10ms);
  }
  REQUIRE(got.has_value());
  return *got;
}

HttpProbeClient::Options Plain(uint16_t port, std::chrono::milliseconds timeout = 5s) {
  HttpProbeClient::Options o;
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout = timeout;
  o.health_target = "/base/health";
  return o;
}

}  // namespace

TEST_CASE("http probe: 200 with a JSON load report over one keep-alive connection",
          "[health][http]") {
  asio::io_context io;
  TestServer server(io);
  HttpProbeClient client(io, Plain(server.port));
  for (int i = 0; i < 5; ++i) {
    const ProbeResult r = RunProbe(io, client);
    REQUIRE(r.ok);
    CHECK(r.status == 200);
    CHECK(r.reason == FailureReason::kNone);
    CHECK(r.rtt > std::chrono::microseconds(0));
    CHECK(r.rtt < std::chrono::microseconds(5'000'000));
    REQUIRE(r.load.has_value());
    CHECK(r.load->queue_depth == 2);
    CHECK(r.load->inflight == 5);
    CHECK(r.load->kv_cache_utilization == Approx(0.5));
  }
  CHECK(server.accepted == 1);
  CHECK(client.connections_opened() == 1);
  REQUIRE(server.targets.size() == 5);
  CHECK(server.targets[0] == "/base/health");
  CHECK(server.hosts[0] == "127.0.0.1:" + std::to_string(server.port));
}

TEST_CASE("http probe: options from config", "[health][http]") {
  auto b = geogate::health::testing::MakeBackend("a", 0);
  b.base_path = "/v";
  geogate::config::Health h;
  h.path = "/healthz";
  h.load_report = "/metrics";
  auto o = HttpProbeClient::Options::From(b, h);
  CHECK(o.health_target == "/v/healthz");
  CHECK(o.load_target == "/v/metrics");
  CHECK_FALSE(o.json_load);
  CHECK(o.port == 8000);
  h.load_report = "off";
  o = HttpProbeClient::Options::From(b, h);
  CHECK(o.load_target.empty());
  CHECK_FALSE(o.json_load);
}

TEST_CASE("http probe: 500 is kBadStatus and keeps the connection", "[health][http]") {
  asio::io_context io;
  TestServer server(io);
  server.mode = TestServer::Mode::kError;
  HttpProbeClient client(io, Plain(server.port));
  for (int i = 0; i < 2; ++i) {
    const ProbeResult r = RunProbe(io, client);
    CHECK_FALSE(r.ok);
    CHECK(r.reason == FailureReason::kBadStatus);
    CHECK(r.status == 500);
  }
  CHECK(server.accepted == 1);
}

TEST_CASE("http probe: a refused port is kConnectRefused at once", "[health][http]") {
  asio::io_context io;
  uint16_t port = 0;
  {
    tcp::acceptor a(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  HttpProbeClient client(io, Plain(port));
  const auto t0 = std::chrono::steady_clock::now();
  const ProbeResult r = RunProbe(io, client);
  CHECK_FALSE(r.ok);
  CHECK(r.reason == FailureReason::kConnectRefused);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);  // not a timeout
}

TEST_CASE("http probe: a server that never answers is kProbeTimeout", "[health][http]") {
  asio::io_context io;
  TestServer server(io);
  server.mode = TestServer::Mode::kSilent;
  HttpProbeClient client(io, Plain(server.port, 300ms));
  const auto t0 = std::chrono::steady_clock::now();
  const ProbeResult r = RunProbe(io, client);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK_FALSE(r.ok);
  CHECK(r.reason == FailureReason::kProbeTimeout);
  CHECK(took >= 250ms);
  CHECK(took < 5s);
  // After a timeout the connection is not reused.
  const ProbeResult r2 = RunProbe(io, client);
  CHECK(r2.reason == FailureReason::kProbeTimeout);
  CHECK(server.accepted == 2);
}

TEST_CASE("http probe: a keep-alive connection closed by the server is reopened",
          "[health][http]") {
  asio::io_context io;
  TestServer server(io);
  server.mode = TestServer::Mode::kCloseAfter;
  HttpProbeClient client(io, Plain(server.port));
  for (int i = 0; i < 3; ++i) {
    const ProbeResult r = RunProbe(io, client);
    CHECK(r.ok);
    // Let the server's close arrive before the next probe.
    for (int k = 0; k < 20; ++k)
      io.poll();
  }
  CHECK(server.accepted == 3);
}

TEST_CASE("http probe: load_report path fetches vLLM metrics on the same connection",
          "[health][http]") {
  asio::io_context io;
  TestServer server(io);
  auto options = Plain(server.port);
  options.json_load = false;
  options.load_target = "/base/metrics";
  HttpProbeClient client(io, options);
  for (int i = 0; i < 2; ++i) {
    const ProbeResult r = RunProbe(io, client);
    REQUIRE(r.ok);
    REQUIRE(r.load.has_value());
    CHECK(r.load->inflight == 11);
    CHECK(r.load->queue_depth == 4);
    CHECK(r.load->kv_cache_utilization == Approx(0.75));
  }
  CHECK(server.accepted == 1);
  CHECK(server.targets ==
        std::vector<std::string>{"/base/health", "/base/metrics", "/base/health", "/base/metrics"});
}

namespace {

using geogate::common::LookupGate;

// A lookup that answers 127.0.0.1 once `gate` is open.
geogate::common::LookupFn GatedLookup(std::shared_ptr<LookupGate> gate) {
  return geogate::common::HeldLookup(std::move(gate), asio::ip::address_v4::loopback());
}

}  // namespace

TEST_CASE("http probe: a host name is looked up once per connection, an address never",
          "[health][http]") {
  asio::io_context io;
  TestServer server(io);
  auto gate = std::make_shared<LookupGate>(true);
  auto named = Plain(server.port);
  named.host = "backend.test";
  named.lookup = GatedLookup(gate);
  HttpProbeClient by_name(io, named);
  for (int i = 0; i < 2; ++i)
    CHECK(RunProbe(io, by_name).ok);
  CHECK(gate->Started() == 1);  // the second probe reused the connection
  CHECK(server.hosts.back() == "backend.test:" + std::to_string(server.port));

  auto literal = Plain(server.port);
  literal.lookup = GatedLookup(gate);
  HttpProbeClient by_address(io, literal);
  CHECK(RunProbe(io, by_address).ok);
  CHECK(gate->Started() == 1);
}

TEST_CASE("http probe: a stalled lookup costs its own probe the timeout, no other's",
          "[health][http]") {
  asio::io_context io;
  TestServer server(io);
  // A name server that stopped answering for one name: its lookup never
  // returns until the end of the test.
  auto stalled = std::make_shared<LookupGate>(false);
  auto a = Plain(server.port, 300ms);
  a.host = "stalled.test";
  a.lookup = GatedLookup(stalled);
  HttpProbeClient client_a(io, a);
  auto answering = std::make_shared<LookupGate>(true);
  auto b = Plain(server.port, 300ms);
  b.host = "other.test";
  b.lookup = GatedLookup(answering);
  HttpProbeClient client_b(io, b);

  std::optional<ProbeResult> got_a;
  const auto t0 = std::chrono::steady_clock::now();
  client_a.probe([&](const ProbeResult& r) { got_a = r; });
  // While a's lookup hangs, b's probe (on the same thread) is served.
  const ProbeResult rb = RunProbe(io, client_b);
  CHECK(rb.ok);
  CHECK_FALSE(got_a.has_value());
  while (!got_a && std::chrono::steady_clock::now() - t0 < 10s)
    io.run_one_for(10ms);
  REQUIRE(got_a.has_value());
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK_FALSE(got_a->ok);
  CHECK(got_a->reason == FailureReason::kConnectTimeout);
  CHECK(took >= 250ms);
  CHECK(took < 5s);
  // The next probe finds the lookup still stuck: it fails at once and
  // starts no second lookup thread.
  const auto t1 = std::chrono::steady_clock::now();
  const ProbeResult again = RunProbe(io, client_a);
  CHECK(again.reason == FailureReason::kConnectTimeout);
  CHECK(std::chrono::steady_clock::now() - t1 < 250ms);
  CHECK(stalled->Started() == 1);
  // Once the name server answers again, so does the probe.
  stalled->Open();
  std::optional<ProbeResult> after;
  const auto t2 = std::chrono::steady_clock::now();
  while (!(after && after->ok) && std::chrono::steady_clock::now() - t2 < 10s) {
    after = RunProbe(io, client_a);
    io.run_for(20ms);
  }
  REQUIRE(after.has_value());
  CHECK(after->ok);
}

TEST_CASE("http probe: cancel abandons the probe and its callback never runs", "[health][http]") {
  asio::io_context io;
  TestServer server(io);
  server.mode = TestServer::Mode::kSilent;
  HttpProbeClient client(io, Plain(server.port, 200ms));
  bool called = false;
  client.probe([&](const ProbeResult&) { called = true; });
  io.run_for(50ms);
  client.cancel();
  io.run_for(300ms);
  CHECK_FALSE(called);
}

TEST_CASE("http probe: TLS with SNI and verification", "[health][http][tls]") {
  TestCert cert;
  asio::io_context io;
  TestServer server(io, &cert);
  auto options = Plain(server.port);
  options.tls = true;
  options.host = "localhost";

  SECTION("trusted through ca_file") {
    options.ca_file = cert.path;
    HttpProbeClient client(io, options);
    for (int i = 0; i < 2; ++i)
      CHECK(RunProbe(io, client).ok);
    CHECK(server.accepted == 1);  // keep-alive over TLS too
    REQUIRE_FALSE(server.sni.empty());
    CHECK(server.sni[0] == "localhost");
    CHECK(server.hosts[0] == "localhost:" + std::to_string(server.port));
  }
  SECTION("verified against the IP SAN, no SNI for an IP literal") {
    options.host = "127.0.0.1";
    options.ca_file = cert.path;
    HttpProbeClient client(io, options);
    CHECK(RunProbe(io, client).ok);
    REQUIRE_FALSE(server.sni.empty());
    CHECK(server.sni[0].empty());
  }
  SECTION("untrusted certificate is kTlsError") {
    HttpProbeClient client(io, options);  // system store: our self-signed cert is unknown
    const ProbeResult r = RunProbe(io, client);
    CHECK_FALSE(r.ok);
    CHECK(r.reason == FailureReason::kTlsError);
  }
  SECTION("tls_verify = false accepts it") {
    options.tls_verify = false;
    HttpProbeClient client(io, options);
    CHECK(RunProbe(io, client).ok);
  }
  SECTION("an unreadable ca_file fails closed") {
    options.ca_file = "/nonexistent/ca.pem";
    HttpProbeClient client(io, options);
    CHECK(RunProbe(io, client).reason == FailureReason::kTlsError);
  }
}

TEST_CASE("health service: probes over HTTP and reacts to a refused connection and stops cleanly",
          "[health][service]") {
  asio::io_context io;
  TestServer server(io);

  std::mutex mu;
  std::vector<StateChange> changes;
  auto service = HealthService::Create({[&](const StateChange& c) {
    std::lock_guard<std::mutex> lock(mu);
    changes.push_back(c);
  }});
  service->Start();

  auto backend = geogate::health::testing::MakeBackend("local", 0);
  backend.host = "127.0.0.1";
  backend.port = server.port;
  backend.url = "http://127.0.0.1:" + std::to_string(server.port);
  auto snapshot = geogate::health::testing::MakeSnapshot({backend});
  HealthTable table;
  auto states = table.Bind(*snapshot);
  service->Update(snapshot, states);

  auto wait_for = [&](auto done) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < end)
      io.run_one_for(10ms);
    return done();
  };
  auto count_changes = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return changes.size();
  };
  REQUIRE(wait_for([&] { return states[0]->state.load() == HealthState::kHealthy; }));
  CHECK(states[0]->rtt_ewma_us.load() > 0);
  CHECK(states[0]->load().inflight == 5);

  // A worker saw the connection refused: out at once, back after two probes.
  service->ReportFailure(states[0], FailureReason::kConnectRefused);
  REQUIRE(wait_for([&] { return count_changes() >= 3; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    CHECK(changes[0].to == HealthState::kHealthy);
    CHECK(changes[1].to == HealthState::kUnhealthy);
    CHECK(changes[1].reason == FailureReason::kConnectRefused);
    CHECK(changes[2].to == HealthState::kHealthy);
  }

  const auto stats = service->Stats();
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].name == "local");
  CHECK(stats[0].probes_ok >= 3);
  CHECK(stats[0].state_changes == 3);

  service->Stop();
  service->Stop();  // idempotent
  const auto accepted = server.accepted;
  io.run_for(300ms);
  CHECK(server.accepted == accepted);  // no more probes
}
