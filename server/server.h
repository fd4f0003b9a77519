// The process: loads the runtime, starts the workers, the health thread and
// the admin listener, and owns the lifecycle: SIGHUP reload (a new snapshot
// published atomically; requests in flight keep theirs), SIGTERM drain
// (/readyz 503 at once, listeners open for drain_delay_ms, streams finish up
// to drain_timeout_ms, exit 0; a second SIGTERM exits at once).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/status/statusor.h"
#include "accounting/budget_tracker.h"
#include "accounting/capacity_utilization.h"
#include "accounting/showback_store.h"
#include "config/snapshot.h"
#include "health/health_service.h"
#include "health/health_table.h"
#include "health/retry_budget.h"
#include "observability/access_log.h"
#include "proxy/connection_limits.h"
#include "proxy/runtime.h"
#include "proxy/server_shared.h"
#include "proxy/tenant_limits.h"
#include "proxy/tls_tickets.h"
#include "proxy/worker.h"
#include "server/heap_trim.h"
#include "tracing/otlp_exporter.h"
#include "tracing/span_batcher.h"

namespace geogate::server {

namespace net = boost::asio;

class AdminServer;

struct ReloadOutcome {
  bool ok = false;
  std::vector<std::string> errors;    // file:line:col: message
  std::vector<std::string> warnings;  // including restart-only changes
  uint64_t generation = 0;
  std::string backend_changes;  // "1 added (x), 2 unchanged"
};

class Server {
 public:
  Server(std::string config_path, config::SnapshotConstPtr initial);
  ~Server();

  /// Whether an io_context can be made here, before the Server makes its
  /// own (its constructor would throw): an error for the log instead of an
  /// uncaught exception. An io_uring build (bench/ab only) where the kernel
  /// refuses io_uring says which defines made it; Asio has no run-time
  /// fallback to epoll, the reactor is chosen at build time.
  static absl::Status CheckAsioBackend();

  /// Runs until drained. @return the process exit code.
  int Run();

  // ---- admin API (main thread) --------------------------------------------
  bool Ready() const;
  bool draining() const { return shared_.draining.load(); }
  net::awaitable<std::string> MetricsText();
  std::string BackendsJson() const;
  std::string ConfigJson() const;
  std::string GeoJson() const;
  /// /admin/showback?from=&to=&group_by=&format=json|csv. @return status,
  /// content type and body.
  net::awaitable<std::tuple<unsigned, std::string, std::string>> ShowbackQuery(std::string query);
  std::string CapacityJson() const;
  ReloadOutcome Reload(std::string_view trigger);
  void BeginDrain(std::string_view trigger);
  const proxy::RuntimeConstPtr& runtime() const { return current_; }

 private:
  absl::StatusOr<proxy::RuntimeConstPtr> BuildRuntime(const config::SnapshotConstPtr& snap,
                                                      const proxy::Runtime* previous,
                                                      bool reopen_geo);
  /// Fails when another process already listens on a configured listener
  /// address; holds a per-address lock against one starting concurrently.
  absl::Status ClaimListenAddresses();
  absl::Status StartListeners();
  void Publish(proxy::RuntimeConstPtr rt);
  /// Points the span exporter at the published [tracing] (main thread).
  void ApplyTracing(const config::Snapshot& snap);
  void OnSignal(int signo);
  void ArmSignals();
  void DrainTick();
  void Finish();
  void StopMainLoop();
  void ScheduleTick();
  net::awaitable<void> Tick();
  net::awaitable<std::vector<accounting::ShowbackBucket>> CollectLedgers(bool all, int64_t now_ms);

  std::string config_path_;
  net::io_context main_ioc_{1};
  net::signal_set signals_{main_ioc_};
  net::steady_timer drain_timer_{main_ioc_};
  // The clock of every worker (health/ keeps its own RealTimeSource).
  health::RealTimeSource time_;
  proxy::ServerShared shared_;
  health::HealthTable health_table_;
  std::unique_ptr<health::HealthService> health_;
  std::unique_ptr<health::RetryBudget> retry_budget_;
  proxy::TenantLimits tenant_limits_;
  proxy::ConnectionsPerIp connections_per_ip_;
  HeapTrimPolicy heap_trim_;
  accounting::BudgetTracker budgets_;
  accounting::ShowbackStore showback_;
  accounting::UtilizationTracker utilization_;
  net::steady_timer tick_timer_{main_ioc_};
  std::unique_ptr<observability::AccessLog> access_log_;
  // [tracing]: the queue from the workers (kept across reloads, made when
  // tracing is first enabled) and the exporter on main_ioc_.
  std::shared_ptr<tracing::SpanBatcher> spans_;
  std::unique_ptr<tracing::OtlpExporter> span_exporter_;
  proxy::SslContextPtr collector_tls_;  // https collector: of the runtime built last
  std::vector<std::unique_ptr<proxy::Worker>> workers_;
  std::unique_ptr<AdminServer> admin_;
  proxy::RuntimeConstPtr current_;
  config::SnapshotConstPtr started_with_;        // listeners/admin/workers as running
  std::vector<std::string> listener_addresses_;  // bound "host:port", by listener index
  std::vector<int> listen_locks_;                // see ClaimListenAddresses
  // Session-ticket keys by listener index (TLS listeners), kept across
  // reloads; every server context of the listener uses them.
  std::vector<std::shared_ptr<proxy::TicketKeys>> listener_tickets_;
  bool listeners_up_ = false;
  std::chrono::steady_clock::time_point drain_started_{};
  bool listeners_closed_ = false;
  bool forced_exit_ = false;
  bool finishing_ = false;       // Finish() ran
  bool flushing_spans_ = false;  // ...and waits for the span flush
  int exit_code_ = 0;

  std::atomic<uint64_t> reloads_ok_{0};
  std::atomic<uint64_t> reloads_failed_{0};
  std::atomic<int64_t> last_reload_ok_unix_{0};
  std::atomic<int64_t> last_reload_failed_unix_{0};
  int termination_signals_ = 0;
  uint64_t generation_ = 0;
  uint64_t geo_reload_failures_ = 0;
};

}  // namespace geogate::server
