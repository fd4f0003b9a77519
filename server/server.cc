#include "server/server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <optional>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "accounting/capacity_export.h"
#include "accounting/capacity_report.h"
#include "accounting/showback_counters.h"
#include "accounting/showback_format.h"
#include "accounting/showback_query.h"
#include "common/json.h"
#include "common/log.h"
#include "common/strings.h"
#include "config/loader.h"
#include "proxy/openai_error.h"
#include "routing/decide.h"
#include "routing/live_health_view.h"
#include "routing/mmdb_geo_resolver.h"
#include "server/admin.h"
#include "server/heap_trim.h"
#include "server/metrics_exporter.h"
#include "server/named_files.h"
#include "tracing/tracer.h"

namespace geogate::server {

using net::ip::tcp;
namespace json = boost::json;

namespace {

using ReusePort = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

// The reactor Asio was built with, as Asio's own configuration decides it:
// named in the start-up log line and in /admin/config. epoll, unless the
// build defines BOOST_ASIO_HAS_IO_URING and BOOST_ASIO_DISABLE_EPOLL (only
// bench/ab's IO_URING variant does: bench/RESULTS.md, "io_uring backend
// A/B", says why it is no build option).
#if defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
constexpr bool kIoUring = true;
constexpr const char* kAsioBackend = "io_uring";
#elif defined(BOOST_ASIO_HAS_EPOLL)
constexpr bool kIoUring = false;
constexpr const char* kAsioBackend = "epoll";
#else
#error "geogate runs on Asio's epoll or io_uring reactor (Linux)"
#endif
constexpr auto kDrainTick = std::chrono::milliseconds(50);

tracing::BatchOptions BatchOptionsOf(const config::Tracing& t) {
  return tracing::BatchOptions{t.batch_size, t.batch_interval, t.queue_limit};
}

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

size_t WorkerCount(const config::Snapshot& s) {
  if (s.gateway.workers != 0) return s.gateway.workers;
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

absl::StatusOr<tcp::acceptor> Bind(net::io_context& ioc, const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  auto addr = net::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("bad listen address ", host));
  tcp::endpoint ep(addr, port);
  tcp::acceptor acceptor(ioc);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.set_option(ReusePort(true), ec);
  if (!ec && addr.is_v6()) acceptor.set_option(net::ip::v6_only(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(4096, ec);
  if (ec)
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port, ": ", ec.message()));
  return acceptor;
}

std::string HostPort(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat(v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

std::string AlreadyListening(const std::string& where) {
  return absl::StrCat("cannot listen on ", where,
                      ": another process is already listening on this address (a second "
                      "geogate? stop it first; the gateway does not share a listener)");
}

// Held for the life of the process: an abstract Unix socket named after the
// listener address. Two geogates starting at the same moment both pass the
// probe below before either listens; the name makes the second one fail.
// Abstract names belong to the network namespace (like the TCP port itself)
// and vanish with the process, so there is no stale lock to clean up.
absl::StatusOr<int> LockListenAddress(const std::string& where) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket(AF_UNIX): ", std::strerror(errno)));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string name = absl::StrCat("geogate-listener ", where);
  name.resize(std::min(name.size(), sizeof sa.sun_path - 1));
  std::memcpy(sa.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EADDRINUSE) return absl::AlreadyExistsError(AlreadyListening(where));
    return absl::InternalError(
        absl::StrCat("cannot lock listener address ", where, ": ", std::strerror(err)));
  }
  return fd;
}

// The workers' acceptors share the port through SO_REUSEPORT, which Linux
// also grants to any other process of the same user (root included), which
// would then silently take a share of new connections. A bind without
// SO_REUSEPORT conflicts with every socket listening on the address;
// SO_REUSEADDR keeps TIME_WAIT leftovers of an earlier run from counting.
absl::Status ProbeListenAddress(net::io_context& ioc, const tcp::endpoint& ep,
                                const std::string& where) {
  boost::system::error_code ec;
  tcp::acceptor probe(ioc);
  probe.open(ep.protocol(), ec);
  if (!ec) probe.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec && ep.address().is_v6()) probe.set_option(net::ip::v6_only(true), ec);
  if (!ec) probe.bind(ep, ec);
  if (ec == net::error::address_in_use) return absl::AlreadyExistsError(AlreadyListening(where));
  if (ec)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", where, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::Status Server::CheckAsioBackend() {
  try {
    net::io_context probe{1};
    // Asio makes its reactor (epoll set or io_uring ring) with the first I/O
    // object, not with the io_context: a timer makes it here.
    net::steady_timer first_io_object(probe);
  } catch (const boost::system::system_error& e) {
    if (kIoUring)
      return absl::FailedPreconditionError(absl::StrCat(
          "this geogate is built on Asio's io_uring backend (BOOST_ASIO_HAS_IO_URING, "
          "BOOST_ASIO_DISABLE_EPOLL) and the kernel refuses io_uring (",
          e.what(),
          "): allow it (/proc/sys/kernel/io_uring_disabled = 0, no seccomp filter or "
          "container policy denying io_uring_setup) or run a build without those (epoll)"));
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create an Asio io_context (", kAsioBackend, "): ", e.what()));
  }
  return absl::OkStatus();
}

Server::Server(std::string config_path, config::SnapshotConstPtr initial)
    : config_path_(std::move(config_path)), started_with_(std::move(initial)) {}

Server::~Server() {
  for (auto& w : workers_)
    w->Stop();
  if (health_) health_->Stop();
  if (access_log_) access_log_->Close();
  for (int fd : listen_locks_)
    ::close(fd);
}

absl::Status Server::ClaimListenAddresses() {
  for (const config::Listener& l : started_with_->gateway.listeners) {
    if (l.port == 0) continue;  // a fresh port each time: nobody else can hold it
    boost::system::error_code ec;
    auto addr = net::ip::make_address(l.host, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("bad listen address ", l.host));
    std::string where = HostPort(addr.to_string(), l.port);
    auto lock = LockListenAddress(where);
    if (!lock.ok()) return lock.status();
    listen_locks_.push_back(*lock);
    if (auto st = ProbeListenAddress(main_ioc_, tcp::endpoint(addr, l.port), where); !st.ok())
      return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<proxy::RuntimeConstPtr> Server::BuildRuntime(const config::SnapshotConstPtr& snap,
                                                            const proxy::Runtime* previous,
                                                            bool reopen_geo) {
  auto rt = std::make_shared<proxy::Runtime>();
  rt->config = snap;

  // Geo database: reopened on every reload; a file that fails to open keeps
  // the previous database when the path is the same, and refuses the reload
  // when it is not. Either failure of a reload counts in
  // geogate_geo_database_reload_failures_total.
  if (!snap->geo.database.empty()) {
    bool same_path = previous && previous->geo &&
                     previous->config->geo.database == snap->geo.database &&
                     previous->config->geo.country_field == snap->geo.country_field &&
                     previous->config->geo.continent_field == snap->geo.continent_field;
    if (!reopen_geo && same_path) {
      rt->geo = previous->geo;
      rt->geo_epoch = previous->geo_epoch;
    } else {
      auto geo = OpenGeoDatabase(*snap, config_path_);
      if (geo.ok()) {
        rt->geo = *geo;
        rt->geo_epoch = rt->geo->Info().build_epoch;
      } else if (same_path) {
        geo_reload_failures_++;
        common::LogWarn("geo", absl::StrCat("cannot reopen geo database, keeping the loaded one: ",
                                            geo.status().message()));
        rt->geo = previous->geo;
        rt->geo_epoch = previous->geo_epoch;
      } else {
        // A reload that names another file which cannot be used is refused
        // as a whole; it is a geo database reload failure all the same.
        if (previous) geo_reload_failures_++;
        return geo.status();
      }
    }
  }

  // Server TLS contexts for the listeners as they run; certificate and key
  // files are re-read on every reload (rotation), new handshakes use them.
  const auto& running = started_with_->gateway.listeners;
  rt->listener_tls.resize(running.size());
  std::vector<std::optional<std::vector<proxy::TicketKey>>> staged_ticket_keys(running.size());
  for (size_t i = 0; i < running.size(); ++i) {
    if (!running[i].tls) continue;
    const config::Listener* now = nullptr;
    for (const auto& l : snap->gateway.listeners)
      if (l.address == running[i].address && l.tls) now = &l;
    if (now == nullptr) {
      if (previous) rt->listener_tls[i] = previous->listener_tls[i];
      continue;
    }
    // The listener's ticket keys outlive every context it gets, so a reload
    // does not send reconnecting clients through a full handshake. Keys
    // from a file are staged and take effect with this runtime.
    if (listener_tickets_.size() < running.size()) listener_tickets_.resize(running.size());
    if (!listener_tickets_[i]) listener_tickets_[i] = std::make_shared<proxy::TicketKeys>(time_);
    auto keys = OpenTicketKeys(*now->tls, config_path_);
    if (!keys.ok()) return keys.status();
    auto ctx = OpenListenerTls(*now->tls, config_path_, listener_tickets_[i]);
    if (!ctx.ok()) return ctx.status();
    rt->listener_tls[i] = *ctx;
    staged_ticket_keys[i] = std::move(*keys);
  }

  // CORS per running listener, from this snapshot's listener at the same
  // address (a reload keeps the set of listeners: config/diff.cc; repeated
  // port-0 listeners pair up in order, as there).
  const auto& next = snap->gateway.listeners;
  rt->listener_cors.assign(running.size(), nullptr);
  std::vector<bool> paired(next.size(), false);
  for (size_t i = 0; i < running.size(); ++i) {
    for (size_t j = 0; j < next.size(); ++j) {
      if (paired[j] || next[j].host != running[i].host || next[j].port != running[i].port) continue;
      paired[j] = true;
      if (next[j].cors.enabled()) rt->listener_cors[i] = &next[j].cors;
      break;
    }
  }

  // Client TLS contexts for https backends, shared per (CA file, verify).
  absl::flat_hash_map<std::string, proxy::SslContextPtr> client_ctx;
  rt->backend_tls.resize(snap->backends.size());
  for (size_t i = 0; i < snap->backends.size(); ++i) {
    const config::Backend& b = snap->backends[i];
    if (!b.tls) continue;
    std::string key = absl::StrCat(b.ca_file, "|", b.tls_verify);
    auto it = client_ctx.find(key);
    if (it == client_ctx.end()) {
      auto ctx = OpenBackendTls(b, config_path_);
      if (!ctx.ok()) return ctx.status();
      it = client_ctx.emplace(key, *ctx).first;
    }
    rt->backend_tls[i] = it->second;
  }

  rt->backends = health_table_.Bind(*snap);
  rt->tenants = tenant_limits_.Bind(*snap);
  rt->budgets = budgets_.Bind(*snap);
  // The collector's TLS context, kept for ApplyTracing() when this runtime
  // is published (which follows a successful build at once).
  auto collector_tls = OpenCollectorTls(snap->tracing, config_path_);
  if (!collector_tls.ok()) return collector_tls.status();
  collector_tls_ = *collector_tls;
  if (snap->tracing.enabled) {
    if (!spans_) spans_ = std::make_shared<tracing::SpanBatcher>(BatchOptionsOf(snap->tracing));
    rt->tracer = std::make_shared<tracing::Tracer>(snap->tracing.sampling_ratio, spans_);
  }
  // Nothing below can fail: the staged ticket keys take effect now (the old
  // contexts share them; their handshakes see the new keys a moment early).
  for (size_t i = 0; i < staged_ticket_keys.size(); ++i)
    if (staged_ticket_keys[i]) listener_tickets_[i]->UseKeys(std::move(*staged_ticket_keys[i]));
  rt->generation = ++generation_;
  return proxy::RuntimeConstPtr(std::move(rt));
}

absl::Status Server::StartListeners() {
  const auto& listeners = started_with_->gateway.listeners;
  for (size_t i = 0; i < listeners.size(); ++i) {
    const config::Listener& l = listeners[i];
    uint16_t port = l.port;
    for (auto& w : workers_) {
      auto acceptor = Bind(w->ioc(), l.host, port);
      if (!acceptor.ok()) return acceptor.status();
      // Port 0 (tests): the first worker picks the port, the others share it.
      port = acceptor->local_endpoint().port();
      w->AddAcceptor(std::move(*acceptor),
                     proxy::ListenerSpec{i, l.tls.has_value(), l.proxy_protocol});
    }
    listener_addresses_.push_back(HostPort(l.host, port));
    // On stderr with the rest of the operational log: stdout carries only
    // access-log records. Tests and tools read the port from "port".
    common::LogInfo("listener",
                    absl::StrCat("listening on ", HostPort(l.host, port), l.tls ? " (TLS)" : "",
                                 l.proxy_protocol ? " (PROXY protocol)" : ""),
                    {{"address", HostPort(l.host, port)},
                     {"port", int64_t{port}},
                     {"tls", l.tls.has_value()},
                     {"proxy_protocol", l.proxy_protocol}});
  }
  return absl::OkStatus();
}

// A reload applies [tracing] whole: the sampling ratio with the runtime,
// the collector, batching and queue limit here. Turning it off leaves the
// exporter running to send what is still queued.
void Server::ApplyTracing(const config::Snapshot& snap) {
  const config::Tracing& t = snap.tracing;
  if (!t.enabled || !spans_) return;
  spans_->Configure(BatchOptionsOf(t));
  tracing::ExportOptions o;
  o.host = t.collector_host;
  o.port = t.collector_port;
  o.path = t.collector_path;
  o.tls = collector_tls_;
  o.timeout = t.export_timeout;
  o.connect_timeout = t.connect_timeout;
  o.poll = std::min<std::chrono::milliseconds>(t.batch_interval, std::chrono::milliseconds(50));
  o.resource.service_name = t.service_name;
  o.resource.service_version = GEOGATE_VERSION;
  o.resource.service_instance = snap.gateway.edge;
  if (!span_exporter_) span_exporter_ = std::make_unique<tracing::OtlpExporter>(main_ioc_, spans_);
  span_exporter_->Configure(std::move(o));
  span_exporter_->Start();
}

void Server::Publish(proxy::RuntimeConstPtr rt) {
  ApplyTracing(*rt->config);
  current_ = rt;
  // Before the workers hear of it and before "applied" is logged: every
  // request whose head completes from here on is decided under `rt`.
  shared_.runtime.Publish(rt);
  for (auto& w : workers_)
    w->Publish(rt);
  if (health_) health_->Update(rt->config, rt->backends);
}

int Server::Run() {
  const config::Snapshot& cfg = *started_with_;
  // First, before any file is opened or replayed: a second instance on the
  // same address stops here.
  if (auto st = ClaimListenAddresses(); !st.ok()) {
    common::LogError("startup", ToStd(st.message()));
    return 1;
  }
  std::string log_error;
  access_log_ = observability::AccessLog::Open(cfg.gateway.access_log, &log_error);
  if (!access_log_) {
    common::LogError("config", log_error);
    return 1;
  }
  shared_.access_log = access_log_.get();
  shared_.tenant_limits = &tenant_limits_;
  shared_.connections_per_ip = &connections_per_ip_;
  retry_budget_ = std::make_unique<health::RetryBudget>(cfg.gateway.upstream.retry_budget_percent,
                                                        cfg.gateway.upstream.retry_budget_min);
  shared_.retry_budget = retry_budget_.get();
  health_ = health::HealthService::Create(
      health::HealthService::Options{[](const health::StateChange& c) {
        std::string msg =
            absl::StrCat("backend ", c.backend, " ", health::HealthStateName(c.from), " -> ",
                         health::HealthStateName(c.to), " (", health::FailureReasonName(c.reason),
                         ")", c.ejected ? " by outlier detection" : "");
        if (c.to == health::HealthState::kHealthy)
          common::LogInfo("health", msg);
        else
          common::LogWarn("health", msg);
      }});
  shared_.health = health_.get();

  auto rt = BuildRuntime(started_with_, nullptr, true);
  if (!rt.ok()) {
    common::LogError("startup", ToStd(rt.status().message()));
    return 1;
  }
  current_ = *rt;

  // Showback: replay what earlier runs wrote, so budgets and queries start
  // from it; a restart loses nothing already written.
  int64_t now_ms = UnixMs();
  auto replay = showback_.Open(accounting::ShowbackStoreOptions::From(cfg), now_ms);
  if (!replay.ok()) {
    common::LogError("startup", ToStd(replay.status().message()));
    return 1;
  }
  if (!cfg.showback.file.empty())
    common::LogInfo("showback",
                    absl::StrCat("replayed ", replay->loaded, " bucket(s) from ", cfg.showback.file,
                                 replay->malformed ? absl::StrCat(", skipped ", replay->malformed,
                                                                  " malformed line(s)")
                                                   : ""));
  budgets_.Seed(showback_.MonthSpend(now_ms), now_ms);
  utilization_.set_sample_interval(cfg.capacity.sample_interval);

  size_t n = WorkerCount(cfg);
  for (size_t i = 0; i < n; ++i) {
    workers_.push_back(std::make_unique<proxy::Worker>(i, shared_, time_));
    shared_.workers.push_back(workers_.back().get());
  }
  if (auto st = StartListeners(); !st.ok()) {
    common::LogError("startup", ToStd(st.message()));
    return 1;
  }
  admin_ = std::make_unique<AdminServer>(main_ioc_, *this);
  if (auto st = admin_->Start(cfg.gateway.admin.host, cfg.gateway.admin.port); !st.ok()) {
    common::LogError("startup", ToStd(st.message()));
    return 1;
  }
  common::LogInfo("admin",
                  absl::StrCat("admin on ", HostPort(cfg.gateway.admin.host, admin_->port())),
                  {{"address", HostPort(cfg.gateway.admin.host, admin_->port())},
                   {"port", int64_t{admin_->port()}}});

  health_->Start();
  health_->Update(current_->config, current_->backends);
  ApplyTracing(*current_->config);
  shared_.runtime.Publish(current_);
  for (auto& w : workers_)
    w->Start(current_);
  listeners_up_ = true;
  reloads_ok_ = 0;
  last_reload_ok_unix_ = absl::ToUnixSeconds(absl::Now());
  common::LogInfo(
      "startup",
      absl::StrCat("geogate ", GEOGATE_VERSION, " edge ", cfg.gateway.edge, ": ", n,
                   " workers on Asio's ", kAsioBackend, " backend, ", cfg.backends.size(),
                   " backends, config ", cfg.source_path, " (", cfg.hash.substr(0, 12), ")"),
      {{"asio_backend", kAsioBackend}});
  ArmSignals();
  ScheduleTick();
  main_ioc_.run();
  return exit_code_;
}

void Server::ArmSignals() {
  signals_.add(SIGHUP);
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.async_wait([this](boost::system::error_code ec, int signo) {
    if (ec) return;
    OnSignal(signo);
    if (!forced_exit_) {
      signals_.async_wait([this](boost::system::error_code ec2, int s2) {
        if (ec2) return;
        OnSignal(s2);
        ArmSignals();
      });
    }
  });
}

void Server::OnSignal(int signo) {
  if (signo == SIGHUP) {
    Reload("SIGHUP");
    return;
  }
  // Only a second *signal* forces the exit: a Kubernetes preStop that calls
  // POST /admin/drain is followed by the kubelet's SIGTERM, which must let
  // the drain it started finish.
  if (termination_signals_++ > 0) {
    common::LogWarn("drain", "second termination signal: exiting now");
    forced_exit_ = true;
    exit_code_ = 1;
    Finish();
    return;
  }
  BeginDrain(signo == SIGTERM ? "SIGTERM" : "SIGINT");
}

ReloadOutcome Server::Reload(std::string_view trigger) {
  ReloadOutcome out;
  config::LoadResult loaded = config::LoadFile(config_path_);
  for (const auto& w : loaded.warnings)
    out.warnings.push_back(w);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) {
      out.errors.push_back(e.ToString());
      common::LogError("reload", e.ToString());
    }
    reloads_failed_++;
    last_reload_failed_unix_ = absl::ToUnixSeconds(absl::Now());
    common::LogWarn("reload",
                    absl::StrCat("reload (", ToAbsl(trigger), ") rejected: ", loaded.errors.size(),
                                 " error(s); the running configuration keeps serving"));
    return out;
  }
  for (const std::string& w : config::RestartRequiredChanges(*started_with_, *loaded.snapshot)) {
    out.warnings.push_back(w + " (needs a restart; not applied)");
  }
  auto rt = BuildRuntime(loaded.snapshot, current_.get(), /*reopen_geo=*/true);
  if (!rt.ok()) {
    // Already "file:line:col: message", at the key that names the file.
    out.errors.emplace_back(ToStd(rt.status().message()));
    common::LogError("reload", out.errors.back());
    reloads_failed_++;
    last_reload_failed_unix_ = absl::ToUnixSeconds(absl::Now());
    return out;
  }
  for (const auto& w : out.warnings)
    common::LogWarn("reload", w);
  config::BackendChanges changes = config::DiffBackends(*current_->config, *loaded.snapshot);
  out.backend_changes = changes.Summary();
  Publish(*rt);
  retry_budget_->configure(loaded.snapshot->gateway.upstream);
  if (access_log_) access_log_->Reopen();
  // The showback file follows the config (path, window) and is reopened for
  // log rotation; a file that cannot be opened keeps the old one.
  if (auto st =
          showback_.Configure(accounting::ShowbackStoreOptions::From(*loaded.snapshot), UnixMs());
      !st.ok())
    common::LogWarn("showback", ToStd(st.message()));
  else if (auto rst = showback_.Reopen(); !rst.ok())
    common::LogWarn("showback", ToStd(rst.message()));
  utilization_.set_sample_interval(loaded.snapshot->capacity.sample_interval);
  reloads_ok_++;
  last_reload_ok_unix_ = absl::ToUnixSeconds(absl::Now());
  out.ok = true;
  out.generation = (*rt)->generation;
  common::LogInfo("reload", absl::StrCat("reload (", ToAbsl(trigger), ") applied: generation ",
                                         out.generation, ", backends: ", out.backend_changes,
                                         ", hash ", loaded.snapshot->hash.substr(0, 12)));
  return out;
}

bool Server::Ready() const {
  if (!listeners_up_ || !current_ || shared_.draining.load()) return false;
  int64_t now = health::ToNanos(std::chrono::steady_clock::now());
  for (const auto& s : current_->backends)
    if (s && s->routable(now)) return true;
  return false;
}

void Server::BeginDrain(std::string_view trigger) {
  if (shared_.draining.exchange(true)) return;
  drain_started_ = std::chrono::steady_clock::now();
  const auto& up = current_->config->gateway.upstream;
  common::LogInfo("drain", absl::StrCat("drain started by ", ToAbsl(trigger),
                                        ": /readyz is 503; listeners close in ",
                                        static_cast<int64_t>(up.drain_delay.count()),
                                        " ms; in-flight requests get up to ",
                                        static_cast<int64_t>(up.drain_timeout.count()), " ms"));
  DrainTick();
}

void Server::DrainTick() {
  auto now = std::chrono::steady_clock::now();
  const auto& up = current_->config->gateway.upstream;
  if (!listeners_closed_ && now - drain_started_ >= up.drain_delay) {
    listeners_closed_ = true;
    for (auto& w : workers_)
      w->StopAccepting();
    common::LogInfo("drain", "listeners closed");
  }
  if (listeners_closed_) {
    if (shared_.open_connections.load() == 0) {
      common::LogInfo("drain", "all connections finished");
      Finish();
      return;
    }
    if (now - drain_started_ >= up.drain_delay + up.drain_timeout) {
      common::LogWarn("drain", absl::StrCat("drain timeout: closing ",
                                            shared_.open_connections.load(), " connection(s)"));
      for (auto& w : workers_)
        w->CloseAll();
      // Give the workers one tick to run the closes, then stop.
      drain_timer_.expires_after(kDrainTick);
      drain_timer_.async_wait([this](boost::system::error_code) { Finish(); });
      return;
    }
  }
  drain_timer_.expires_after(kDrainTick);
  drain_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) DrainTick();
  });
}

void Server::Finish() {
  if (finishing_) {
    // A second termination signal while the spans are flushed: now.
    if (flushing_spans_) {
      span_exporter_->Stop();
      StopMainLoop();
    }
    return;
  }
  finishing_ = true;
  if (admin_) admin_->Stop();
  for (auto& w : workers_)
    w->Stop();
  // The worker threads are joined: their ledgers can be read from here.
  std::vector<accounting::ShowbackBucket> rest;
  for (auto& w : workers_) {
    auto b = w->showback_ledger().TakeAll();
    rest.insert(rest.end(), std::make_move_iterator(b.begin()), std::make_move_iterator(b.end()));
  }
  showback_.Append(rest, UnixMs());
  boost::system::error_code tick_ec;
  tick_timer_.cancel();
  if (health_) health_->Stop();
  if (access_log_) access_log_->Close();
  // The workers are joined: no span comes any more. What is queued goes to
  // the collector within tracing.flush_timeout_ms (a forced exit drops it);
  // the signals stay armed meanwhile, so a second one still ends it now.
  if (span_exporter_ && !forced_exit_) {
    flushing_spans_ = true;
    std::chrono::milliseconds bound = current_->config->tracing.flush_timeout;
    span_exporter_->Flush(bound, [this, bound](const tracing::FlushOutcome& o) {
      std::string msg =
          absl::StrCat("shutdown: sent ", o.sent, " queued span(s) to the collector",
                       o.dropped > 0 ? absl::StrCat(", dropped ", o.dropped) : "",
                       o.timed_out ? absl::StrCat(" (flush_timeout_ms ",
                                                  static_cast<int64_t>(bound.count()), " reached)")
                                   : "");
      if (o.dropped > 0)
        common::LogWarn("tracing", msg);
      else if (o.sent > 0)
        common::LogInfo("tracing", msg);
      StopMainLoop();
    });
    return;
  }
  if (span_exporter_) span_exporter_->Stop();
  StopMainLoop();
}

void Server::StopMainLoop() {
  boost::system::error_code ec;
  signals_.cancel(ec);
  drain_timer_.cancel();
  main_ioc_.stop();
}

void Server::ScheduleTick() {
  tick_timer_.expires_after(current_->config->capacity.sample_interval);
  tick_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    net::co_spawn(main_ioc_, Tick(), [this](std::exception_ptr) {
      if (!shared_.draining.load() || !listeners_closed_ || shared_.open_connections.load() > 0)
        ScheduleTick();
    });
  });
}

// Once a second (capacity.sample_interval): utilisation samples, closed
// showback minutes from every worker into the store, budget notices.
net::awaitable<void> Server::Tick() {
  const proxy::RuntimeConstPtr rt = current_;
  utilization_.Sample(std::chrono::steady_clock::now(), *rt->config, rt->backends);
  int64_t now_ms = UnixMs();
  std::vector<accounting::ShowbackBucket> closed = co_await CollectLedgers(/*all=*/false, now_ms);
  showback_.Append(closed, now_ms);
  for (const accounting::BudgetEvent& e : budgets_.Poll(now_ms))
    common::LogWarn("budget", e.Describe());
  // After a burst of connections (half-open TLS handshakes, a flood) the
  // allocator holds what they freed: hand it back (server/heap_trim.h).
  if (heap_trim_.Observe(shared_.open_connections.load(), std::chrono::steady_clock::now()))
    TrimHeap();
}

net::awaitable<std::vector<accounting::ShowbackBucket>> Server::CollectLedgers(bool all,
                                                                               int64_t now_ms) {
  std::vector<accounting::ShowbackBucket> out;
  for (auto& w : workers_) {
    proxy::Worker* worker = w.get();
    std::vector<accounting::ShowbackBucket> got = co_await net::co_spawn(
        worker->ioc(),
        [worker, all, now_ms]() -> net::awaitable<std::vector<accounting::ShowbackBucket>> {
          co_return all ? worker->showback_ledger().Snapshot()
                        : worker->showback_ledger().TakeClosed(now_ms);
        },
        net::use_awaitable);
    out.insert(out.end(), std::make_move_iterator(got.begin()), std::make_move_iterator(got.end()));
  }
  co_return out;
}

net::awaitable<std::tuple<unsigned, std::string, std::string>> Server::ShowbackQuery(
    std::string query) {
  int64_t now_ms = UnixMs();
  auto q = accounting::ParseShowbackQuery(query, now_ms);
  if (!q.ok())
    co_return std::tuple<unsigned, std::string, std::string>{
        400, "application/json",
        proxy::ErrorBody(proxy::ErrorKind::kBadRequest, ToStd(q.status().message()))};
  std::vector<accounting::ShowbackBucket> live;
  if (q->live) live = co_await CollectLedgers(/*all=*/true, now_ms);
  accounting::ShowbackResult res = showback_.Query(*q, live);
  if (q->format == accounting::ShowbackFormat::kCsv)
    co_return std::tuple<unsigned, std::string, std::string>{200, "text/csv; charset=utf-8",
                                                             accounting::FormatShowbackCsv(res)};
  co_return std::tuple<unsigned, std::string, std::string>{200, "application/json",
                                                           accounting::FormatShowbackJson(res)};
}

std::string Server::CapacityJson() const {
  return accounting::CapacityJson(accounting::BuildCapacityReport(
      *current_->config, current_->backends, utilization_, std::chrono::steady_clock::now()));
}

net::awaitable<std::string> Server::MetricsText() {
  proxy::WorkerMetrics merged;
  for (auto& w : workers_) {
    proxy::Worker* worker = w.get();
    proxy::WorkerMetrics copy = co_await net::co_spawn(
        worker->ioc(),
        [worker]() -> net::awaitable<proxy::WorkerMetrics> {
          proxy::WorkerMetrics m = worker->metrics();
          m.connections_idle = worker->idle_sessions().size();
          co_return m;
        },
        net::use_awaitable);
    copy.MergeInto(merged);
  }
  MetricsInputs in;
  in.workers = &merged;
  in.runtime = current_.get();
  in.health = health_ ? health_->Stats() : std::vector<health::BackendHealthStats>{};
  in.reloads_ok = reloads_ok_.load();
  in.reloads_failed = reloads_failed_.load();
  in.last_reload_ok_unix = last_reload_ok_unix_.load();
  in.last_reload_failed_unix = last_reload_failed_unix_.load();
  in.geo_reload_failures = geo_reload_failures_;
  in.open_connections = shared_.open_connections.load();
  in.active_requests = shared_.active_requests.load();
  in.active_streams = shared_.active_streams.load();
  in.draining = shared_.draining.load();
  in.ready = Ready();
  in.access_log_dropped = access_log_ ? access_log_->dropped_batches() : 0;
  if (spans_) {
    in.trace_spans_exported = spans_->exported();
    in.trace_spans_dropped_queue_full = spans_->dropped_queue_full();
    in.trace_spans_dropped_export_failed = spans_->dropped_export_failed();
  }
  in.listener_addresses = &listener_addresses_;
  in.listeners = &started_with_->gateway.listeners;
  std::string text = FormatMetrics(in);
  // Showback, budgets and capacity families.
  observability::PromWriter w;
  accounting::WriteShowbackCounters(w, merged.showback);
  budgets_.WriteMetrics(w, UnixMs());
  accounting::WriteCapacityMetrics(
      w, accounting::BuildCapacityReport(*current_->config, current_->backends, utilization_,
                                         std::chrono::steady_clock::now()));
  accounting::ShowbackStoreStats st = showback_.stats();
  w.Family("geogate_showback_write_errors_total", "counter",
           "Showback lines that could not be appended to the showback file.");
  w.Sample("geogate_showback_write_errors_total", {}, static_cast<double>(st.write_errors));
  text += w.Take();
  co_return text;
}

std::string Server::BackendsJson() const {
  const proxy::Runtime& rt = *current_;
  const config::Snapshot& cfg = *rt.config;
  int64_t now = health::ToNanos(std::chrono::steady_clock::now());
  int64_t wall_ms = absl::ToUnixMillis(absl::Now());
  // A monotonic time as Unix milliseconds, or null for "never" (0).
  auto wall = [&](int64_t mono_ns) {
    return mono_ns == 0 ? json::value(nullptr) : json::value(wall_ms + (mono_ns - now) / 1'000'000);
  };
  // Milliseconds to the microsecond, or null for "no sample" (< 0).
  auto ms = [](double v) {
    return v < 0 ? json::value(nullptr) : json::value(std::round(v * 1000) / 1000);
  };
  json::array out;
  for (size_t i = 0; i < cfg.backends.size(); ++i) {
    const config::Backend& b = cfg.backends[i];
    const health::BackendState& s = *rt.backends[i];
    routing::BackendObservation o = routing::ObserveState(s, now);
    out.emplace_back(json::object{
        {"name", b.name},
        {"region", cfg.regions[b.region_index].name},
        {"url", b.url},
        {"gpu", b.gpu},
        {"provider", b.provider},
        {"tier", config::TierName(b.tier)},
        {"healthy", o.routable()},
        {"state", health::HealthStateName(o.state)},
        {"reason", health::FailureReasonName(s.reason.load())},
        {"rtt_ms", ms(o.rtt_ms)},
        {"ttft_ms", ms(o.ttft_ms)},
        {"expected_ttft_ms", ms(routing::ExpectedTtftMs(cfg, i, o))},
        {"inflight", o.inflight},
        {"capacity", b.capacity},
        {"utilization", static_cast<double>(o.inflight) / b.capacity},
        {"ejected_until", wall(s.ejected_until_ns.load())},
        {"ejections", s.ejections.load()},
        {"consecutive_failures", s.consecutive_failures.load()},
        {"last_change", wall(s.since_ns.load())},
    });
  }
  return common::SerializeJson(out);
}

std::string Server::ConfigJson() const {
  const proxy::Runtime& rt = *current_;
  const config::Snapshot& cfg = *rt.config;
  return common::SerializeJson(json::object{
      {"hash", cfg.hash},
      {"source", cfg.source_path},
      {"generation", rt.generation},
      {"loaded_at", absl::FormatTime(absl::RFC3339_sec, cfg.loaded_at, absl::UTCTimeZone())},
      {"edge", cfg.gateway.edge},
      {"regions", cfg.regions.size()},
      {"backends", cfg.backends.size()},
      {"models", cfg.models.size()},
      {"residency_rules", cfg.residency.size()},
      {"tenants", cfg.tenants.size()},
      {"reloads",
       json::object{{"success", reloads_ok_.load()}, {"failure", reloads_failed_.load()}}},
      {"asio_backend", kAsioBackend},
  });
}

std::string Server::GeoJson() const {
  const proxy::Runtime& rt = *current_;
  if (!rt.geo) return common::SerializeJson(json::object{{"database", nullptr}});
  routing::GeoDbInfo info = rt.geo->Info();
  return common::SerializeJson(json::object{
      {"database", info.path},
      {"type", info.database_type},
      {"build_epoch", info.build_epoch},
      {"build_time", absl::FormatTime(absl::RFC3339_sec, absl::FromUnixSeconds(info.build_epoch),
                                      absl::UTCTimeZone())},
      {"ip_version", info.ip_version},
      {"node_count", info.node_count},
      {"country_field", rt.config->geo.country_field},
      {"reload_failures", geo_reload_failures_},
  });
}

}  // namespace geogate::server
