// Sends batches from a SpanBatcher to an OTLP/HTTP collector (POST, JSON
// body), one request at a time, on the io_context it is given (the server's
// main context: never a worker's). A batch whose request fails (connect,
// timeout, non-2xx) is dropped and counted; there is no retry queue, so a
// collector that is down costs a bounded amount of memory and nothing else.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "tracing/otlp_json.h"
#include "tracing/span_batcher.h"

namespace geogate::tracing {

struct ExportOptions {
  std::string host;
  uint16_t port = 80;
  std::string path = "/v1/traces";
  std::chrono::milliseconds timeout{2000};
  std::chrono::milliseconds poll{50};  // how often the batcher is asked for a due batch
  ResourceInfo resource;
};

class OtlpExporter {
 public:
  OtlpExporter(boost::asio::io_context& ioc, std::shared_ptr<SpanBatcher> batcher);
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  /// Where and how the next batches go (on the io_context's thread).
  void Configure(ExportOptions options);
  /// Starts the loop (once).
  void Start();
  /// Ends the loop; a request in flight is abandoned.
  void Stop();

 private:
  struct State;
  static boost::asio::awaitable<void> Loop(std::shared_ptr<State> st);
  static boost::asio::awaitable<bool> Post(std::shared_ptr<State> st, std::string body);

  std::shared_ptr<State> state_;
};

}  // namespace geogate::tracing
