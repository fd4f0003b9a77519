// geogate-responder: the fast native upstream of bench/compare's throughput
// lanes (see README.md). Every answer is built once at start-up, with Beast
// for the HTTP head and gpusim's own formatters (bench/gpusim/responses.h)
// for the bodies, so the bytes are the ones gpusim sends; a request costs
// one Beast read and, for a whole answer, one write.
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "bench/gpusim/options.h"
#include "bench/gpusim/responses.h"
#include "common/await.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using geogate::common::kAwait;
using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

enum class Kind { kJson, kStream, kEvents };

struct Config {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  Kind kind = Kind::kJson;
  int64_t tokens = 64;
  int64_t prompt_tokens = 3;
  double step_ms = 0;
  int threads = 1;
  std::string name = "responder";
  std::string model = "llama-3.1-8b";
  bool usage_null_chunks = false;  // --chunk-shape openai
};

constexpr const char* kUsage =
    "usage: geogate-responder [--listen HOST:PORT] [--answer json|stream|events]\n"
    "                         [--tokens N] [--prompt-tokens N] [--step-ms MS] [--threads N]\n"
    "                         [--name NAME] [--model MODEL] [--chunk-shape vllm|openai]\n"
    "A POST gets the --answer; any other method the json one. HTTP/1.1 keep-alive.\n"
    "  json    a non-streamed chat.completion of --tokens tokens (gpusim's body)\n"
    "  stream  a whole SSE chat stream of --tokens tokens, the finish, usage and\n"
    "          [DONE] chunks (gpusim's bytes, chunked), in one write\n"
    "  events  the same stream, one write per token: with --step-ms > 0 each on\n"
    "          the next tick of a decode grid shared by every stream (as gpusim\n"
    "          --decode-step-ms); with 0 back to back\n"
    "--chunk-shape: vllm (default) has usage in the usage chunk alone; openai also\n"
    "  \"usage\":null in every other chunk, as api.openai.com sends a stream that\n"
    "  asked for usage.\n"
    "--listen 127.0.0.1:0 picks a port; the bound port is printed on stdout.\n"
    "--threads N: N threads, each its own io_context and SO_REUSEPORT acceptor.\n";

std::optional<Config> parse_args(int argc, char** argv, std::string& error) {
  Config c;
  auto number = [&error](std::string_view flag, std::string_view text, auto& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec != std::errc() || end != text.data() + text.size() || out < 0) {
      error = std::string(flag) + ": not a number: " + std::string(text);
      return false;
    }
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      error = kUsage;
      return std::nullopt;
    }
    if (i + 1 >= argc) {
      error = std::string(flag) + ": needs a value (or unknown flag)";
      return std::nullopt;
    }
    const std::string_view value = argv[++i];
    bool ok = true;
    if (flag == "--listen") {
      auto hp = gpusim::parse_host_port(std::string(value));
      ok = hp.has_value();
      if (ok) c.host = hp->host, c.port = hp->port;
      if (!ok) error = "--listen: expected HOST:PORT";
    } else if (flag == "--answer") {
      ok = value == "json" || value == "stream" || value == "events";
      c.kind = value == "json" ? Kind::kJson : value == "stream" ? Kind::kStream : Kind::kEvents;
      if (!ok) error = "--answer: json, stream or events";
    } else if (flag == "--tokens") {
      ok = number(flag, value, c.tokens);
    } else if (flag == "--prompt-tokens") {
      ok = number(flag, value, c.prompt_tokens);
    } else if (flag == "--step-ms") {
      ok = number(flag, value, c.step_ms);
    } else if (flag == "--threads") {
      ok = number(flag, value, c.threads) && c.threads >= 1;
      if (!ok && error.empty()) error = "--threads: at least 1";
    } else if (flag == "--name") {
      c.name = value;
    } else if (flag == "--model") {
      c.model = value;
    } else if (flag == "--chunk-shape") {
      ok = value == "vllm" || value == "openai";
      c.usage_null_chunks = value == "openai";
      if (!ok) error = "--chunk-shape: vllm or openai";
    } else {
      error = "unknown flag " + std::string(flag);
      ok = false;
    }
    if (!ok) return std::nullopt;
  }
  return c;
}

template <class Message>
std::string serialize(const Message& m) {
  std::ostringstream out;
  out << m;
  return out.str();
}

template <class Body>
void set_headers(http::response<Body>& res, const Config& c, bool keep_alive) {
  res.set(http::field::server, "geogate-responder");
  res.set("x-gpusim-backend", c.name);
  res.keep_alive(keep_alive);
}

// Every byte the responder sends, per keep-alive choice ([0] close, [1] keep).
struct Answers {
  std::string json[2];              // a whole non-streamed answer
  std::string stream_head[2];       // the head of a chunked SSE answer
  std::string stream[2];            // head and every event: one write
  std::vector<std::string> events;  // kEvents: one chunk per write; the last
                                    // carries finish, usage, [DONE] and the end
  std::string version_not_supported;
};

Answers build_answers(const Config& c) {
  gpusim::Options o;
  o.name = c.name;
  o.models = {c.model};
  o.usage_null_chunks = c.usage_null_chunks;
  const gpusim::ResponseFactory factory(o);
  gpusim::GenerationRequest r;
  r.completion_tokens = c.tokens;
  r.prompt_tokens = c.prompt_tokens;
  Answers a;
  const std::string body = factory.full_body(r, "chatcmpl-responder", 0);
  for (int keep = 0; keep < 2; ++keep) {
    http::response<http::string_body> res{http::status::ok, 11};
    set_headers(res, c, keep != 0);
    res.set(http::field::content_type, "application/json");
    res.body() = body;
    res.prepare_payload();
    a.json[keep] = serialize(res);
    http::response<http::empty_body> head{http::status::ok, 11};
    set_headers(head, c, keep != 0);
    head.set(http::field::content_type, "text/event-stream");
    head.set(http::field::cache_control, "no-cache");
    head.chunked(true);
    a.stream_head[keep] = serialize(head.base());
  }
  r.stream = true;
  r.include_usage = true;
  gpusim::SseWriter sse;
  sse.begin(factory, r, "chatcmpl-responder", 0, /*chunked=*/true);
  for (int64_t i = 0; i < c.tokens; ++i)
    a.events.push_back(sse.token(i));
  std::string tail = sse.finish();
  tail += sse.usage(r.prompt_tokens, r.completion_tokens);
  tail += sse.done();
  if (a.events.empty()) a.events.emplace_back();
  a.events.back() += tail;
  for (int keep = 0; keep < 2; ++keep) {
    a.stream[keep] = a.stream_head[keep];
    for (const auto& e : a.events)
      a.stream[keep] += e;
  }
  http::response<http::empty_body> v{http::status::http_version_not_supported, 11};
  set_headers(v, c, false);
  v.content_length(0);
  a.version_not_supported = serialize(v.base());
  return a;
}

struct Shared {
  const Config& config;
  const Answers& answers;
  Clock::time_point grid_start;
};

// The next tick of the decode grid strictly after `after`.
Clock::time_point next_tick(const Shared& s, Clock::time_point after) {
  const auto step = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(s.config.step_ms));
  return s.grid_start + ((after - s.grid_start) / step + 1) * step;
}

asio::awaitable<bool> write(tcp::socket& socket, const std::string& bytes) {
  auto [ec, n] = co_await asio::async_write(socket, asio::buffer(bytes), kAwait);
  co_return !ec;
}

asio::awaitable<bool> write_events(tcp::socket& socket, const Shared& s, bool keep) {
  if (!co_await write(socket, s.answers.stream_head[keep])) co_return false;
  asio::steady_timer timer(socket.get_executor());
  auto tick = Clock::now();
  for (const auto& event : s.answers.events) {
    if (s.config.step_ms > 0) {
      tick = next_tick(s, tick);
      timer.expires_at(tick);
      auto [ec] = co_await timer.async_wait(kAwait);
      if (ec) co_return false;
    }
    if (!co_await write(socket, event)) co_return false;
  }
  co_return true;
}

// Beast's parser of a whole request, keeping only what the answer depends
// on: the method and the version (keep-alive is the parser's own). The
// fields and the body are parsed and dropped, so a request costs no
// allocation. A request_parser<string_body> allocated and freed every field
// and the body per request: 8,300 instructions of user space per burst
// stream under callgrind, against 6,000 with this parser. The burst row's
// upstream must stay 3x faster than the proxies (bench/compare).
class RequestSkimmer : public http::basic_parser<true> {
 public:
  http::verb method() const { return method_; }
  int version() const { return version_; }

 private:
  void on_request_impl(http::verb method, beast::string_view, beast::string_view, int version,
                       beast::error_code&) override {
    method_ = method;
    version_ = version;
  }
  void on_response_impl(int, beast::string_view, int, beast::error_code&) override {}
  void on_field_impl(http::field, beast::string_view, beast::string_view,
                     beast::error_code&) override {}
  void on_header_impl(beast::error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, beast::error_code&) override {}
  std::size_t on_body_impl(beast::string_view body, beast::error_code&) override {
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, beast::error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, beast::string_view body,
                                 beast::error_code&) override {
    return body.size();
  }
  void on_finish_impl(beast::error_code&) override {}

  http::verb method_ = http::verb::unknown;
  int version_ = 0;
};

asio::awaitable<void> serve(tcp::socket socket, const Shared& s) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  beast::flat_buffer buffer;
  for (;;) {
    RequestSkimmer req;
    req.body_limit(1 << 20);
    auto [ec, n] = co_await http::async_read(socket, buffer, req, kAwait);
    if (ec) break;
    if (req.version() != 11) {
      co_await write(socket, s.answers.version_not_supported);
      break;
    }
    const int keep = req.keep_alive() ? 1 : 0;
    bool ok;
    if (req.method() != http::verb::post || s.config.kind == Kind::kJson) {
      ok = co_await write(socket, s.answers.json[keep]);
    } else if (s.config.kind == Kind::kStream) {
      ok = co_await write(socket, s.answers.stream[keep]);
    } else {
      ok = co_await write_events(socket, s, keep);
    }
    if (!ok || !keep) break;
  }
  socket.shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, const Shared& s) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(kAwait);
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) continue;  // e.g. EMFILE: try again on the next connection
    asio::co_spawn(acceptor.get_executor(), serve(std::move(socket), s), asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string error;
  const std::optional<Config> config = parse_args(argc, argv, error);
  if (!config) {
    const bool help = error == kUsage;
    std::fputs(error.c_str(), help ? stdout : stderr);
    if (!help) std::fputs("\n", stderr);
    return help ? 0 : 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const Answers answers = build_answers(*config);
  const Shared shared{*config, answers, Clock::now()};

  // One io_context, acceptor and thread per --threads; every acceptor on the
  // same port (SO_REUSEPORT), the first one's when --listen asked for port 0.
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  tcp::endpoint where;
  try {
    where = tcp::endpoint(asio::ip::make_address(config->host), config->port);
    for (int i = 0; i < config->threads; ++i) {
      contexts.push_back(std::make_unique<asio::io_context>(1));
      auto acceptor = std::make_unique<tcp::acceptor>(*contexts.back());
      acceptor->open(where.protocol());
      acceptor->set_option(asio::socket_base::reuse_address(true));
      acceptor->set_option(ReusePort(true));
      acceptor->bind(where);
      acceptor->listen(4096);
      where = acceptor->local_endpoint();
      acceptors.push_back(std::move(acceptor));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "geogate-responder: %s:%u: %s\n", config->host.c_str(), config->port,
                 e.what());
    return 1;
  }
  std::printf("listening on %s:%u\n", where.address().to_string().c_str(), where.port());
  std::fflush(stdout);

  asio::signal_set signals(*contexts.front(), SIGINT, SIGTERM);
  signals.async_wait([&contexts](const beast::error_code&, int) {
    for (auto& io : contexts)
      io->stop();
  });
  for (size_t i = 0; i < contexts.size(); ++i)
    asio::co_spawn(*contexts[i], accept_loop(*acceptors[i], shared), asio::detached);
  std::vector<std::thread> threads;
  for (size_t i = 1; i < contexts.size(); ++i)
    threads.emplace_back([&io = *contexts[i]] { io.run(); });
  contexts.front()->run();
  for (auto& t : threads)
    t.join();
  return 0;
}
