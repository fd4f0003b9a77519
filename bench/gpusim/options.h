// Command-line options of geogate-gpusim.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/gpusim/tunables.h"

namespace gpusim {

/// A "HOST:PORT" pair as given on the command line ("[::1]:0" for IPv6).
struct HostPort {
  std::string host;
  uint16_t port = 0;
};

/// Everything the command line can set. Run-time tunables (mode, delays) are
/// only the initial values: the control listener changes them later.
struct Options {
  HostPort listen{"127.0.0.1", 8000};
  std::optional<HostPort> control;
  std::string port_file;
  std::string name = "gpusim";
  std::string region = "local";
  std::vector<std::string> models{"llama-3.1-8b"};
  Tunables initial;  // mode, n, factor, rtt, ttft, token interval
  int64_t tokens = 16;
  int64_t max_tokens_cap = 4096;
  double decode_step_ms = 0;  // 0 = no shared decode grid
  int64_t max_concurrency = 0;
  int64_t queue_limit = 0;
  std::string tls_cert;
  std::string tls_key;
  int threads = 1;
  bool log_requests = false;
  int64_t record_requests = 0;     // heads kept for GET /control/requests
  double idle_timeout_ms = 60000;  // keep-alive idle / header read / TLS handshake
  uint64_t max_body_bytes = 4 * 1024 * 1024;
  // A stream that asked for usage (stream_options.include_usage): false,
  // vLLM's chunks (no usage member before the usage chunk); true, OpenAI's
  // (every other chunk carries "usage":null). --chunk-shape vllm|openai.
  bool usage_null_chunks = false;
};

/// Parses argv. On a bad or unknown flag returns std::nullopt and sets
/// `error`; on --help sets `error` to the usage text and `help` to true.
std::optional<Options> parse_options(int argc, char** argv, std::string& error, bool& help);

/// Parses "HOST:PORT" or "[V6]:PORT".
std::optional<HostPort> parse_host_port(const std::string& text);

/// The usage text printed by --help.
std::string usage();

}  // namespace gpusim
