// Per-chunk cost of the SSE relay's CPU work, without sockets: what the
// gateway does with one upstream read that holds one token (a chunked
// HTTP/1.1 chunk carrying one `data:` event, as gpusim and vLLM send them).
//   ParseChunk  - ParseBufferedBody, the relay's own parse step: its
//                 response parser (UpstreamResponseParser, on Beast's
//                 basic_parser) takes the chunk from the connection's
//                 buffer into the relay buffer (the chunk header, then its
//                 data);
//   Observe     - SseObserver::Filter on the event: the usage and content
//                 checks, the token gap; `strip` is the default (the
//                 gateway asked for the usage chunk, the client did not),
//                 `pass` when the client asked for it too, `pass,
//                 usage:null` in OpenAI's chunk shape ("usage":null in
//                 every chunk of a stream that asked for usage);
//   FindKeys    - the one-pass key scan inside Observe, alone.
// and per whole stream that arrives in one write (the `burst` rows of
// bench/compare and bench/ab: geogate-responder's 64-token chat stream,
// gpusim's bytes, one chunk per event), split only where the relay's
// buffers split it (kUpstreamReadBytes per read, kRelayBufferBytes per
// parse):
//   BurstParse   - ParseBufferedBody over the whole chunked stream: the
//                  de-chunking copy into the relay buffer (the relay's
//                  per-byte work that any HTTP/1.1 proxy re-framing a
//                  chunked body does);
//   BurstObserve - SseObserver::Filter and Finish over the de-chunked
//                  stream: the SSE scanning that accounting needs (usage,
//                  content events, token gaps; `strip` also drops the
//                  usage chunk), the one cost a byte relay does not have;
//   BurstCopy    - a memcpy of the de-chunked bytes: a floor per byte
//                  moved through user space, for scale.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "bench/gpusim/options.h"
#include "bench/gpusim/responses.h"
#include "common/block_cache.h"
#include "proxy/relay_parse.h"
#include "proxy/sse_observer.h"
#include "proxy/sse_scan.h"
#include "proxy/upstream_connector.h"
#include "proxy/worker.h"

namespace {

namespace http = boost::beast::http;
using geogate::proxy::FindSseEventKeys;
using geogate::proxy::kRelayBufferBytes;
using geogate::proxy::kUpstreamReadBytes;
using geogate::proxy::ParseBufferedBody;
using geogate::proxy::SseObserver;
using Parser = geogate::proxy::UpstreamResponseParser;  // the relay's parser

// A chat chunk; `usage_null`: in OpenAI's own shape when the request asked
// for the usage chunk (every other chunk then carries "usage":null).
std::string Event(int i, bool usage_null = false) {
  char buf[320];
  int n =
      std::snprintf(buf, sizeof buf,
                    "data: {\"id\":\"chatcmpl-fc99f1e80-1\",\"object\":\"chat.completion.chunk\","
                    "\"created\":1796114264,\"model\":\"llama-3.1-8b\",\"choices\":[{\"index\":0,"
                    "\"delta\":{\"content\":\"tok%d \"},\"finish_reason\":null}]%s}\n\n",
                    i % 1000, usage_null ? ",\"usage\":null" : "");
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

// Arg: 0 strip (the client did not ask for usage), 1 pass (it did), 2 pass
// with OpenAI's chunk shape ("usage":null in each chunk).
void BM_Observe(benchmark::State& state) {
  bool client_wants_usage = state.range(0) != 0;
  bool usage_null = state.range(0) == 2;
  const std::string event = Event(7, usage_null);
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
  state.SetLabel(usage_null ? "pass, usage:null" : client_wants_usage ? "pass" : "strip");
}
BENCHMARK(BM_Observe)->Arg(0)->Arg(1)->Arg(2);

void BM_FindKeys(benchmark::State& state) {
  const std::string event = Event(7);
  std::string_view data(event);
  data.remove_prefix(6);  // "data: "
  for (auto _ : state)
    benchmark::DoNotOptimize(FindSseEventKeys(data));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_FindKeys);

// The events of one stream through one SseKeyScanner (the observer's way):
// each chunk's start is compared with the last one's, not scanned.
void BM_FindKeysStream(benchmark::State& state) {
  std::vector<std::string> events;
  for (int i = 0; i < 64; ++i)
    events.push_back(Event(i, state.range(0) != 0).substr(6));  // minus "data: "
  geogate::proxy::SseKeyScanner scanner;
  size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& data = events[i++ % events.size()];
    bytes += data.size();
    benchmark::DoNotOptimize(scanner.Find(data));
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetLabel(state.range(0) != 0 ? "usage:null" : "");
}
BENCHMARK(BM_FindKeysStream)->Arg(0)->Arg(1);

// geogate-responder's `--answer stream --tokens 64` body: chunked, one
// chunk per event (64 tokens, the finish, usage, [DONE]), the last chunk.
std::string BurstBody() {
  gpusim::Options o;
  o.name = "burst";
  o.models = {"burst"};
  const gpusim::ResponseFactory factory(o);
  gpusim::GenerationRequest r;
  r.completion_tokens = 64;
  r.stream = true;
  r.include_usage = true;
  gpusim::SseWriter sse;
  sse.begin(factory, r, "chatcmpl-responder", 0, /*chunked=*/true);
  std::string body;
  for (int64_t i = 0; i < r.completion_tokens; ++i)
    body += sse.token(i);
  body += sse.finish();
  body += sse.usage(r.prompt_tokens, r.completion_tokens);
  body += sse.done();
  return body;
}

const std::string kBurstHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

// The stream de-chunked, in the pieces the relay hands the observer: one
// per upstream read of kUpstreamReadBytes (the first read also carries the
// head), each at most kRelayBufferBytes. Also checks the parse.
std::vector<std::string> BurstPieces(const std::string& body) {
  std::vector<std::string> pieces;
  Parser parser;
  boost::beast::flat_buffer in;
  boost::system::error_code ec;
  std::string wire = kBurstHead + body;
  std::vector<char> relay(kRelayBufferBytes);
  size_t at = 0;
  bool head = true;
  while (!parser.is_done() && at < wire.size()) {
    size_t n = std::min(kUpstreamReadBytes, wire.size() - at);
    auto space = in.prepare(n);
    std::memcpy(space.data(), wire.data() + at, n);
    in.commit(n);
    at += n;
    if (head) {
      in.consume(parser.put(in.data(), ec));
      head = false;
    }
    for (;;) {
      size_t got = ParseBufferedBody(parser, in, relay.data(), relay.size(), 0, ec);
      if (ec) return {};
      if (got == 0) break;
      pieces.emplace_back(relay.data(), got);
    }
  }
  if (!parser.is_done()) return {};
  return pieces;
}

void BM_BurstParse(benchmark::State& state) {
  const std::string wire = kBurstHead + BurstBody();
  std::vector<char> relay(kRelayBufferBytes);
  size_t out = 0;
  for (auto _ : state) {
    Parser parser;
    boost::beast::flat_buffer in;
    in.reserve(kUpstreamReadBytes);
    boost::system::error_code ec;
    size_t at = 0;
    bool head = true;
    out = 0;
    while (!parser.is_done() && at < wire.size()) {
      size_t n = std::min(kUpstreamReadBytes, wire.size() - at);
      auto space = in.prepare(n);
      std::memcpy(space.data(), wire.data() + at, n);
      in.commit(n);
      at += n;
      if (head) {
        in.consume(parser.put(in.data(), ec));
        head = false;
      }
      for (size_t got;
           (got = ParseBufferedBody(parser, in, relay.data(), relay.size(), 0, ec)) != 0;)
        out += got;
    }
    if (ec || !parser.is_done()) {
      state.SkipWithError("the burst did not parse");
      break;
    }
    benchmark::DoNotOptimize(relay.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * wire.size()));
  state.counters["body_bytes"] = static_cast<double>(out);
}
BENCHMARK(BM_BurstParse);

void BM_BurstObserve(benchmark::State& state) {
  bool client_wants_usage = state.range(0) != 0;
  const std::vector<std::string> pieces = BurstPieces(BurstBody());
  size_t bytes = 0;
  for (const auto& p : pieces)
    bytes += p.size();
  auto now = std::chrono::steady_clock::now();
  for (auto _ : state) {
    SseObserver observer(/*sse=*/true, client_wants_usage);
    for (const auto& p : pieces)
      benchmark::DoNotOptimize(observer.Filter(p, now));
    benchmark::DoNotOptimize(observer.Finish(now));
    if (observer.completion_tokens() != 64 || !observer.usage_seen()) {
      state.SkipWithError("the burst was not accounted");
      break;
    }
    now += std::chrono::microseconds(50);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["pieces"] = static_cast<double>(pieces.size());
  state.SetLabel(client_wants_usage ? "pass" : "strip");
}
BENCHMARK(BM_BurstObserve)->Arg(0)->Arg(1);

void BM_BurstCopy(benchmark::State& state) {
  const std::vector<std::string> pieces = BurstPieces(BurstBody());
  std::vector<char> out(kRelayBufferBytes);
  size_t bytes = 0;
  for (const auto& p : pieces)
    bytes += p.size();
  for (auto _ : state) {
    for (const auto& p : pieces) {
      std::memcpy(out.data(), p.data(), p.size());
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_BurstCopy);

}  // namespace

BENCHMARK_MAIN();
