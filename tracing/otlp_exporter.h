// Sends batches from a SpanBatcher to an OTLP/HTTP collector (POST, JSON
// body), one request at a time, on the io_context it is given (the server's
// main context: never a worker's). One keep-alive HTTP/1.1 connection
// (plain, or TLS for https://) carries batch after batch; it is opened again
// after an error, and a kept connection the collector closed meanwhile is
// retried once on a new one. Name resolution, connect and TLS handshake are
// bounded by connect_timeout, the whole request by timeout. A batch whose
// request fails (connect, timeout, non-2xx) is dropped and counted; there is
// no retry queue, so a collector that is down costs a bounded amount of
// memory and nothing else. At shutdown Flush() sends what is still queued,
// within a bound.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include "tracing/otlp_json.h"
#include "tracing/span_batcher.h"

namespace geogate::tracing {

struct ExportOptions {
  std::string host;  // a name or an IP literal (IPv6 without brackets)
  uint16_t port = 80;
  std::string path = "/v1/traces";
  /// Non-null: https. The context verifies the collector's certificate
  /// (system CAs or a CA file); the exporter sets SNI (for names) and checks
  /// the certificate against `host`.
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::chrono::milliseconds timeout{2000};          // one export request, end to end
  std::chrono::milliseconds connect_timeout{1000};  // resolve + connect + TLS handshake
  std::chrono::milliseconds poll{50};  // how often the batcher is asked for a due batch
  ResourceInfo resource;
};

/// What Flush() did.
struct FlushOutcome {
  uint64_t sent = 0;       // spans the collector accepted during the flush
  uint64_t dropped = 0;    // spans refused, failed or still queued at the bound
  bool timed_out = false;  // the bound was reached
};

class OtlpExporter {
 public:
  OtlpExporter(boost::asio::io_context& ioc, std::shared_ptr<SpanBatcher> batcher);
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  /// Where and how the next batches go (on the io_context's thread). A
  /// changed collector (host, port or TLS context) gets a new connection.
  void Configure(ExportOptions options);
  /// Starts the loop (once).
  void Start();
  /// Ends the loop; a request in flight is abandoned, a Flush() in progress
  /// ends without calling its `done`.
  void Stop();
  /// At shutdown, once no span is added any more: sends every queued span,
  /// batch after batch regardless of batch_interval, within `bound`; then
  /// stops and calls `done` on the io_context's thread. A request still in
  /// flight at the bound is abandoned; what is left queued is dropped. A
  /// bound of 0, or an exporter never started, drops at once.
  void Flush(std::chrono::milliseconds bound, std::function<void(const FlushOutcome&)> done);

  /// Connections opened to the collector so far (io_context's thread).
  uint64_t connections_opened() const;

 private:
  struct State;
  struct Conn;
  static boost::asio::awaitable<void> Loop(std::shared_ptr<State> st);
  static boost::asio::awaitable<bool> Post(std::shared_ptr<State> st, std::string body);
  static boost::asio::awaitable<std::string> Connect(std::shared_ptr<State> st,
                                                     const ExportOptions& o,
                                                     std::chrono::steady_clock::time_point end);
  static void EndFlush(State& st, bool timed_out);

  std::shared_ptr<State> state_;
};

}  // namespace geogate::tracing
