// Per-chunk cost of the SSE relay's CPU work, without sockets: what the
// gateway does with one upstream read that holds one token (a chunked
// HTTP/1.1 chunk carrying one `data:` event, as gpusim and vLLM send them).
//   ParseChunk  - Beast's response parser takes the chunk into the relay
//                 buffer (the chunk header, then its data);
//   Observe     - SseObserver::Filter on the event: the usage and content
//                 checks, the token gap; `strip` is the default (the
//                 gateway asked for the usage chunk, the client did not),
//                 `pass` when the client asked for it too;
//   FindKeys    - the one-pass key scan inside Observe, alone.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "gateway/sse_observer.h"
#include "gateway/sse_scan.h"

namespace {

namespace http = boost::beast::http;
using geogate::gateway::FindSseEventKeys;
using geogate::gateway::SseObserver;

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
  char relay[16384];
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(head), ec);
  // The first chunk has no CRLF before its size line.
  const std::string first = chunk.substr(2);
  parser.get().body().data = relay;
  parser.get().body().size = sizeof relay;
  for (std::string_view rest = first; !rest.empty() && !ec;)
    rest.remove_prefix(parser.put(boost::asio::buffer(rest.data(), rest.size()), ec));
  for (auto _ : state) {
    size_t got = 0;
    std::string_view rest = chunk;
    while (!rest.empty()) {
      parser.get().body().data = relay + got;
      parser.get().body().size = sizeof relay - got;
      size_t used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
      got = sizeof relay - parser.get().body().size;
      rest.remove_prefix(used);
      if (ec == http::error::need_buffer) ec = {};
      if (ec || used == 0) break;
    }
    if (got != event.size()) {
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
