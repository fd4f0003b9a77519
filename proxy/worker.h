// One worker = one thread running its own io_context, with its own
// SO_REUSEPORT acceptor per listener, its own upstream pool, metrics and
// access-log buffer. Nothing on the request path is shared with other
// workers except the atomics in BackendState and ServerShared.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/container/flat_hash_set.h"
#include "accounting/showback_ledger.h"
#include "common/buffer_pool.h"
#include "common/bulk_queue.h"
#include "health/asio_timer.h"
#include "health/time_source.h"
#include "health/timer_queue.h"
#include "observability/access_log.h"
#include "proxy/idle_list.h"
#include "proxy/runtime.h"
#include "proxy/server_shared.h"
#include "proxy/upstream_pool.h"
#include "proxy/worker_metrics.h"

namespace geogate::proxy {

class Session;

struct ListenerSpec {
  size_t index = 0;  // into the listener set the process started with
  bool tls = false;
  bool proxy_protocol = false;
};

/// Sets on a listener what every connection it accepts needs: TCP_NODELAY,
/// once for all of them instead of a setsockopt per accepted socket (Linux
/// gives an accepted socket its listener's options).
boost::system::error_code PrepareListener(net::ip::tcp::acceptor& acceptor);

/// Bytes read from a backend per relay step (and the most sent per write).
inline constexpr size_t kRelayBufferBytes = 16 * 1024;
/// Idle relay buffers a worker keeps (4 MiB).
inline constexpr size_t kRelayBuffersKept = 256;
/// What a client connection reads into at once, and how many of these
/// read buffers a worker keeps for connections that wait (1 MiB).
inline constexpr size_t kClientReadBytes = 4096;
inline constexpr size_t kClientReadBuffersKept = 256;

class Worker {
 public:
  /// @param time the clock of everything on this worker: sessions, the
  ///        proxy call, the Watchdog and the pool read time only through it.
  /// @param timers the one timer under the deadlines of its connections
  ///        (the Watchdogs, the pool's connects; all in one TimerQueue) comes
  ///        from here; null (production): a timer on its io_context.
  /// @param upstreams where proxy calls get their upstream connections;
  ///        null (production): the worker's own pool.
  Worker(size_t id, ServerShared& shared, const health::TimeSource& time,
         health::TimerFactory* timers = nullptr, UpstreamConnector* upstreams = nullptr);
  ~Worker();

  size_t id() const { return id_; }
  net::io_context& ioc() { return *ioc_; }
  ServerShared& shared() { return shared_; }
  const health::TimeSource& time() const { return time_; }
  /// Where a connection's deadlines get their timers: entries of one heap
  /// on one timer (health/timer_queue.h), this thread only.
  health::TimerFactory& timers() { return deadlines_; }

  /// Takes a bound SO_REUSEPORT acceptor and prepares it (PrepareListener;
  /// called on the main thread before Start).
  void AddAcceptor(net::ip::tcp::acceptor acceptor, ListenerSpec spec);
  void Start(RuntimeConstPtr runtime);
  /// Thread-safe: tells the worker that `runtime` was published (the server
  /// has already stored it in ServerShared, where requests find it). The
  /// worker adopts it if it has not yet, and re-arms the deadlines of its
  /// idle connections with the new limits.
  void Publish(RuntimeConstPtr runtime);
  /// Thread-safe: stop accepting; close idle keep-alive connections; busy
  /// ones close after their current response.
  void StopAccepting();
  /// Thread-safe: close every connection now (drain timeout reached).
  void CloseAll();
  /// Thread-safe: stop the loop (after drain) and join the thread.
  void Stop();

  // ---- worker thread only -------------------------------------------------
  /// The runtime this worker adopted last: for limits and housekeeping.
  const PinnedRuntime& runtime() const { return runtime_.held(); }
  /// The runtime published last, adopted first if this worker has not yet
  /// (one atomic load when nothing changed). What a request is decided
  /// under: a reload applies to every head completed after it.
  const PinnedRuntime& CurrentRuntime();
  /// Where proxy calls take and give back upstream connections.
  UpstreamConnector& upstreams() { return *upstreams_; }
  WorkerMetrics& metrics() { return metrics_; }
  observability::AccessLogBuffer& access_log() { return log_; }
  /// 16 KiB relay buffers for proxied responses, recycled.
  common::BufferPool& relay_buffers() { return relay_buffers_; }
  /// 4 KiB read buffers of client connections, given back while they wait.
  common::BufferPool& read_buffers() { return read_buffers_; }
  /// Where relays of flowing streams run: after new requests' steps.
  common::BulkQueue& bulk() { return bulk_; }
  /// Showback buckets of this worker; the server collects closed minutes.
  accounting::ShowbackLedger& showback_ledger() { return ledger_; }
  void Register(Session* s) { sessions_.insert(s); }
  /// Requests of this worker between their head and their last byte.
  size_t& requests_in_progress() { return requests_in_progress_; }
  void Unregister(Session* s) { sessions_.erase(s); }
  /// Connections waiting for their client, oldest first (max_connections).
  IdleList& idle_sessions() { return idle_sessions_; }
  /// Closes the connection idle longest (counted as evicted), if any.
  void CloseOldestIdle();
  /// Connections being answered 503 by a limit, bounded per worker.
  size_t& refusals_in_flight() { return refusals_in_flight_; }

  // ---- any thread ---------------------------------------------------------
  /// When this worker's longest-idle connection went idle, or kNoIdle.
  int64_t oldest_idle_ns() const { return idle_sessions_.oldest_since_ns(); }
  /// CloseOldestIdle on this worker's thread.
  void PostCloseOldestIdle();
  bool accepting() const { return accepting_; }
  /// A cheap per-worker random number (selection, jitter).
  uint64_t Random();

 private:
  net::awaitable<void> AcceptLoop(size_t acceptor_index);
  /// What follows adopting a runtime on this worker.
  void Adopted();
  void ScheduleHousekeeping();
  /// Asks the connections idle for `park_after` to park (once each).
  void ParkIdleSessions(health::MonotonicTime now, health::Millis park_after);

  size_t id_;
  ServerShared& shared_;
  const health::TimeSource& time_;
  // Owned through a pointer so the destructor can destroy it (and with it the
  // coroutine frames of sessions still pending at exit) while the members
  // those frames touch on their way out (sessions_, metrics_) still exist.
  // Every socket and timer of a worker is used on its thread only (listeners
  // are bound before the thread starts; other threads only post), so the
  // reactor's per-descriptor locks are dropped. Posting stays locked.
  std::unique_ptr<net::io_context> ioc_ =
      std::make_unique<net::io_context>(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  health::AsioTimerFactory own_timers_{*ioc_};
  health::TimerFactory* timers_;  // &own_timers_ unless the constructor was given another
  health::TimerQueue deadlines_{*timers_, time_};
  std::thread thread_;
  std::vector<std::pair<net::ip::tcp::acceptor, ListenerSpec>> acceptors_;
  LocalRuntime runtime_;
  UpstreamPool pool_{*ioc_, time_, deadlines_};
  UpstreamConnector* upstreams_;  // &pool_ unless the constructor was given another
  common::BulkQueue bulk_{*ioc_, config::Upstream{}.relay_batch};  // Start sets the configured one
  WorkerMetrics metrics_;
  observability::AccessLogBuffer log_;
  common::BufferPool relay_buffers_{kRelayBufferBytes, kRelayBuffersKept};
  common::BufferPool read_buffers_{kClientReadBytes, kClientReadBuffersKept};
  accounting::ShowbackLedger ledger_;
  absl::flat_hash_set<Session*> sessions_;
  IdleList idle_sessions_;
  size_t refusals_in_flight_ = 0;
  std::unique_ptr<net::steady_timer> housekeeping_ = std::make_unique<net::steady_timer>(*ioc_);
  bool accepting_ = true;
  size_t requests_in_progress_ = 0;
  uint64_t rng_state_;
};

}  // namespace geogate::proxy
