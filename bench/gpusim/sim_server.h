// The main listener: N workers, each with its own io_context and
// SO_REUSEPORT acceptor, serving the simulated OpenAI API, and the failure
// modes that act on them (refuse closes and re-opens the acceptors, stall
// parks every answer until the mode changes).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "bench/gpusim/concurrency_limiter.h"
#include "bench/gpusim/options.h"
#include "bench/gpusim/recent_requests.h"
#include "bench/gpusim/responses.h"
#include "bench/gpusim/stats.h"
#include "bench/gpusim/tunables.h"

namespace gpusim {

class Worker;

/// State every worker shares. Immutable after start-up except the members
/// that are thread-safe by themselves (tunables, stats, limiter).
struct SimContext {
  explicit SimContext(const Options& o);

  const Options options;
  const ResponseFactory responses;
  TunablesStore tunables;
  Stats stats;
  ConcurrencyLimiter limiter;
  RecentRequests recent;                           // --record-requests
  std::unique_ptr<boost::asio::ssl::context> tls;  // set when serving HTTPS
  const std::chrono::steady_clock::time_point grid_start = std::chrono::steady_clock::now();
  const std::string id_prefix;  // unique per process: ids differ across restarts
  std::mutex log_mu;
};

class SimServer {
 public:
  explicit SimServer(const Options& options);
  ~SimServer();

  /// Loads the TLS files (if any) and binds every worker's acceptor on the
  /// same port (port 0 is resolved by the first). Returns false and sets
  /// `error` on failure. With initial mode `refuse` the acceptors are bound
  /// (to own the port) and closed again.
  bool bind(std::string& error);
  /// The bound address as "HOST:PORT" and its port.
  std::string bound_address() const;
  uint16_t port() const;

  /// Starts one thread per worker.
  void start();

  /// Applies a control update. Mode changes that act on the listeners
  /// (refuse, leaving refuse, leaving stall) have taken effect on every
  /// worker when this returns.
  Tunables apply(const TunablesUpdate& update);

  SimContext& context() { return ctx_; }

 private:
  SimContext ctx_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::mutex apply_mu_;
};

}  // namespace gpusim
