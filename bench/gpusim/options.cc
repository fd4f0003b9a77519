#include "bench/gpusim/options.h"

#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <string_view>

namespace gpusim {
namespace {

bool parse_double(std::string_view text, double& out) {
  // std::from_chars for double is in libstdc++ 11+.
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && std::isfinite(out);
}

bool parse_int(std::string_view text, int64_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

// "die_after:3" and "slow:2.5" carry the mode's argument after a colon.
bool parse_mode_arg(std::string_view text, Tunables& t, std::string& error) {
  const size_t colon = text.find(':');
  const auto mode = parse_mode(text.substr(0, colon));
  if (!mode) {
    error = "unknown mode '" + std::string(text) +
            "' (healthy, refuse, error500, stall, die_after[:N], slow[:F])";
    return false;
  }
  t.mode = *mode;
  if (colon == std::string_view::npos) return true;
  const std::string_view arg = text.substr(colon + 1);
  if (*mode == Mode::kDieAfter) {
    int64_t n = 0;
    if (!parse_int(arg, n) || n < 0) {
      error = "die_after needs a non-negative token count";
      return false;
    }
    t.die_after_n = n;
    return true;
  }
  if (*mode == Mode::kSlow) {
    double f = 0;
    if (!parse_double(arg, f) || f <= 0) {
      error = "slow needs a positive factor";
      return false;
    }
    t.slow_factor = f;
    return true;
  }
  error = "mode '" + std::string(mode_name(*mode)) + "' takes no argument";
  return false;
}

}  // namespace

std::optional<HostPort> parse_host_port(const std::string& text) {
  std::string host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    port_text = std::string_view(text).substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) return std::nullopt;
    host = text.substr(0, colon);
    port_text = std::string_view(text).substr(colon + 1);
  }
  int64_t port = 0;
  if (host.empty() || !parse_int(port_text, port) || port < 0 || port > 65535) {
    return std::nullopt;
  }
  return HostPort{host, static_cast<uint16_t>(port)};
}

std::string usage() {
  return R"(usage: geogate-gpusim [options]
An OpenAI-compatible GPU inference backend simulator. Serves POST
/v1/chat/completions, /v1/completions, /v1/responses, /v1/embeddings, GET
/v1/models, /health, /metrics (see bench/README.md).

  --listen HOST:PORT        main listener (default 127.0.0.1:8000; port 0 = any free port)
  --port-file F             also write the bound port number to F
  --control HOST:PORT       control listener, never affected by failure modes
  --name NAME               backend name (default gpusim)
  --region REGION           region name (default local)
  --models a,b              served models (default llama-3.1-8b)
  --rtt-ms X                delay before every response head (default 0)
  --ttft-ms X               time to first token after the RTT (default 20)
  --token-interval-ms X     gap between tokens (default 10; 0 = as fast as possible)
  --tokens N                default completion length (default 16)
  --max-tokens-cap N        cap on the request's max_tokens (default 4096)
  --decode-step-ms S        emit every token on a shared global grid of S ms
  --max-concurrency N       generations at once, the rest queue FIFO (default 0 = unlimited)
  --queue-limit M           queued requests beyond which 429 (default 0 = unlimited)
  --tls-cert F --tls-key F  serve HTTPS on --listen
  --threads N               worker threads (default 1)
  --mode MODE               healthy | refuse | error500 | stall | die_after[:N] | slow[:F]
  --idle-timeout-ms X       keep-alive idle, header read and TLS handshake deadline (default 60000)
  --chunk-shape vllm|openai when a stream asks for usage: vllm (default) sends usage
                            in the usage chunk alone, openai also "usage":null in every
                            other chunk, as api.openai.com does
  --log-requests            one JSON line per request on stderr
  --record-requests N       keep the heads of the last N requests (not /health) for
                            GET /control/requests (default 0 = none)
  --help
)";
}

std::optional<Options> parse_options(int argc, char** argv, std::string& error, bool& help) {
  Options o;
  help = false;
  auto positive_ms = [&](double& field) {
    return [&field](std::string_view v) { return parse_double(v, field) && field >= 0; };
  };
  auto int_at_least = [](int64_t& field, int64_t min) {
    return [&field, min](std::string_view v) { return parse_int(v, field) && field >= min; };
  };
  int64_t threads = o.threads;
  std::map<std::string_view, std::function<bool(std::string_view)>> with_value{
      {"--listen",
       [&](std::string_view v) {
         auto hp = parse_host_port(std::string(v));
         if (hp) o.listen = *hp;
         return hp.has_value();
       }},
      {"--control",
       [&](std::string_view v) {
         o.control = parse_host_port(std::string(v));
         return o.control.has_value();
       }},
      {"--port-file", [&](std::string_view v) { return !(o.port_file = v).empty(); }},
      {"--name", [&](std::string_view v) { return !(o.name = v).empty(); }},
      {"--region", [&](std::string_view v) { return !(o.region = v).empty(); }},
      {"--models", [&](std::string_view v) { return !(o.models = split_list(v)).empty(); }},
      {"--rtt-ms", positive_ms(o.initial.rtt_ms)},
      {"--ttft-ms", positive_ms(o.initial.ttft_ms)},
      {"--token-interval-ms", positive_ms(o.initial.token_interval_ms)},
      {"--decode-step-ms", positive_ms(o.decode_step_ms)},
      {"--idle-timeout-ms", positive_ms(o.idle_timeout_ms)},
      {"--tokens", int_at_least(o.tokens, 1)},
      {"--max-tokens-cap", int_at_least(o.max_tokens_cap, 1)},
      {"--max-concurrency", int_at_least(o.max_concurrency, 0)},
      {"--queue-limit", int_at_least(o.queue_limit, 0)},
      {"--record-requests", int_at_least(o.record_requests, 0)},
      {"--threads", int_at_least(threads, 1)},
      {"--tls-cert", [&](std::string_view v) { return !(o.tls_cert = v).empty(); }},
      {"--tls-key", [&](std::string_view v) { return !(o.tls_key = v).empty(); }},
      {"--chunk-shape",
       [&](std::string_view v) {
         o.usage_null_chunks = v == "openai";
         return v == "openai" || v == "vllm";
       }},
  };

  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help = true;
      error = usage();
      return std::nullopt;
    }
    if (arg == "--log-requests") {
      o.log_requests = true;
      continue;
    }
    std::string_view value;
    bool has_inline_value = false;
    if (const size_t eq = arg.find('='); eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline_value = true;
    }
    if (arg == "--mode") {
      if (!has_inline_value) {
        if (i + 1 >= argc) {
          error = "--mode needs a value";
          return std::nullopt;
        }
        value = argv[++i];
      }
      if (!parse_mode_arg(value, o.initial, error)) return std::nullopt;
      continue;
    }
    auto it = with_value.find(arg);
    if (it == with_value.end()) {
      error = "unknown option " + std::string(arg) + " (see --help)";
      return std::nullopt;
    }
    if (!has_inline_value) {
      if (i + 1 >= argc) {
        error = std::string(arg) + " needs a value";
        return std::nullopt;
      }
      value = argv[++i];
    }
    if (!it->second(value)) {
      error = "bad value '" + std::string(value) + "' for " + std::string(arg);
      return std::nullopt;
    }
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    error = "--tls-cert and --tls-key go together";
    return std::nullopt;
  }
  if (o.tokens > o.max_tokens_cap) o.tokens = o.max_tokens_cap;
  o.threads = static_cast<int>(std::min<int64_t>(threads, 256));
  return o;
}

}  // namespace gpusim
