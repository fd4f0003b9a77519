// Per-chunk cost of the SSE relay's CPU work, without sockets: what the
// gateway does with one upstream read that holds one token (a chunked
// HTTP/1.1 chunk carrying one `data:` event, as gpusim and vLLM send them).
//   ParseChunk  - ParseBufferedBody, the relay's own parse step: Beast's
//                 response parser takes the chunk from the connection's
//                 buffer into the relay buffer (the chunk header, then its
//                 data);
//   Observe     - SseObserver::Filter on the event: the usage and content
//                 checks, the token gap; `strip` is the default (the
//                 gateway asked for the usage chunk, the client did not),
//                 `pass` when the client asked for it too;
//   FindKeys    - the one-pass key scan inside Observe, alone.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "common/block_cache.h"
#include "proxy/relay_parse.h"
#include "proxy/sse_observer.h"
#include "proxy/sse_scan.h"
#include "proxy/worker.h"

namespace {

namespace http = boost::beast::http;
using geogate::gateway::FindSseEventKeys;
using geogate::gateway::kRelayBufferBytes;
using geogate::gateway::ParseBufferedBody;
using geogate::gateway::SseObserver;
using Parser = http::response_parser<http::buffer_body, geogate::gateway::PooledAllocator<char>>;

std::string Event(int i) {
  char buf[320];
  int n =
      std::snprintf(buf, sizeof buf,
                    "data: {\"id\":\"chatcmpl-fc99f1e80-1\",\"object\":\"chat.completion.chunk\","
                    "\"created\":1796114264,\"model\":\"llama-3.1-8b\",\"choices\":[{\"index\":0,"
                    "\"delta\":{\"content\":\"tok%d \"},\"finish_reason\":null}]}\n\n",
                    i % 1000);
  return std::string(buf, static_cast<size_t>(n));
}

// A chunk as the parser meets it after the first: the CRLF that ends the
// previous chunk's data, the size line, the data.
std::string Chunk(const std::string& event) {
  char size[16];
  int n = std::snprintf(size, sizeof size, "\r\n%zx\r\n", event.size());
  return std::string(size, static_cast<size_t>(n)) + event;
}

void BM_ParseChunk(benchmark::State& state) {
  const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string event = Event(7);
  const std::string chunk = Chunk(event);
  char relay[kRelayBufferBytes];
  Parser parser;  // the relay's parser type
  parser.body_limit(boost::none);
  boost::beast::flat_buffer in;
  boost::system::error_code ec;
  auto read = [&](std::string_view bytes) {  // as a backend read lands
    auto space = in.prepare(bytes.size());
    std::memcpy(space.data(), bytes.data(), bytes.size());
    in.commit(bytes.size());
  };
  read(head);
  in.consume(parser.put(in.data(), ec));
  read(std::string_view(chunk).substr(2));  // no CRLF before the first size line
  ParseBufferedBody(parser, in, relay, sizeof relay, 0, ec);
  for (auto _ : state) {
    read(chunk);
    size_t got = ParseBufferedBody(parser, in, relay, sizeof relay, 0, ec);
    if (ec || got != event.size()) {
      state.SkipWithError("the chunk did not parse");
      break;
    }
    benchmark::DoNotOptimize(got);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * chunk.size()));
}
BENCHMARK(BM_ParseChunk);

void BM_Observe(benchmark::State& state) {
  bool client_wants_usage = state.range(0) != 0;
  const std::string event = Event(7);
  auto now = std::chrono::steady_clock::now();
  SseObserver observer(/*sse=*/true, client_wants_usage);
  int64_t n = 0;
  for (auto _ : state) {
    // A stream's worth of tokens per observer, as the relay sees them.
    if (++n % 4096 == 0) observer = SseObserver(true, client_wants_usage);
    now += std::chrono::microseconds(20);
    benchmark::DoNotOptimize(observer.Filter(event, now));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * event.size()));
  state.SetLabel(client_wants_usage ? "pass" : "strip");
}
BENCHMARK(BM_Observe)->Arg(0)->Arg(1);

void BM_FindKeys(benchmark::State& state) {
  const std::string event = Event(7);
  std::string_view data(event);
  data.remove_prefix(6);  // "data: "
  for (auto _ : state)
    benchmark::DoNotOptimize(FindSseEventKeys(data));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_FindKeys);

}  // namespace

BENCHMARK_MAIN();
