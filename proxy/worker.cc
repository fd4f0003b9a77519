#include "proxy/worker.h"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <random>

#include "absl/container/inlined_vector.h"
#include "common/await.h"
#include "common/log.h"
#include "common/splitmix64.h"
#include "proxy/connection_limits.h"
#include "proxy/session.h"

namespace geogate::proxy {

namespace {
constexpr auto kHousekeepingInterval = std::chrono::milliseconds(100);
// Refused connections are answered 503 while at most this many are being
// answered on a worker; beyond it (a flood) they are closed at once, so
// refusing cannot cost more descriptors than this.
constexpr size_t kMaxRefusalsInFlight = 64;
}  // namespace

Worker::Worker(size_t id, ServerShared& shared, const health::TimeSource& time,
               health::TimerFactory* timers, UpstreamConnector* upstreams)
    : id_(id),
      shared_(shared),
      time_(time),
      timers_(timers != nullptr ? timers : &own_timers_),
      runtime_(shared.runtime),
      upstreams_(upstreams != nullptr ? upstreams : &pool_),
      log_(shared.access_log),
      rng_state_(std::random_device{}()) {}

Worker::~Worker() {
  Stop();
  // Teardown order matters: everything bound to the io_context goes first,
  // then the io_context (destroying pending session frames, whose
  // destructors unregister from sessions_), then the rest of the members.
  acceptors_.clear();
  housekeeping_.reset();
  bulk_.Clear();  // relays that never ran: their coroutines end here
  pool_.Clear();
  pool_.Abandon();        // host-name lookups still running post nothing to the io_context
  deadlines_.Shutdown();  // its timer is the io_context's; the sessions' entries go below
  ioc_.reset();
}

uint64_t Worker::Random() {
  // Fast, good enough for spreading load, per worker (no sharing).
  return SplitMix64(rng_state_);
}

boost::system::error_code PrepareListener(net::ip::tcp::acceptor& acceptor) {
  boost::system::error_code ec;
  acceptor.set_option(net::ip::tcp::no_delay(true), ec);
  return ec;
}

void Worker::AddAcceptor(net::ip::tcp::acceptor acceptor, ListenerSpec spec) {
  // Without it the connections still work, their small writes only wait
  // for Nagle's algorithm.
  if (auto ec = PrepareListener(acceptor)) common::LogWarn("listener TCP_NODELAY", ec.message());
  acceptors_.emplace_back(std::move(acceptor), spec);
}

void Worker::Start(RuntimeConstPtr runtime) {
  if (runtime_.Adopt(std::move(runtime))) Adopted();
  for (size_t i = 0; i < acceptors_.size(); ++i)
    net::co_spawn(*ioc_, AcceptLoop(i), net::detached);
  ScheduleHousekeeping();
  thread_ = std::thread([this] {
    for (;;) {
      try {
        ioc_->run();
        break;
      } catch (const std::exception& e) {
        // A bug escaped a handler: log it and keep serving the others.
        common::LogError("worker", std::string("unhandled exception: ") + e.what());
      }
    }
  });
}

void Worker::Adopted() {
  bulk_.set_batch((*runtime_.held())->config->gateway.upstream.relay_batch);
}

const PinnedRuntime& Worker::CurrentRuntime() {
  if (runtime_.Refresh()) Adopted();
  return runtime_.held();
}

void Worker::Publish(RuntimeConstPtr runtime) {
  net::post(*ioc_, [this, rt = std::move(runtime)]() mutable {
    if (runtime_.Adopt(std::move(rt))) Adopted();
    // Connections waiting for their next request count their idle time
    // under the limits in force now, not those of when they went idle.
    const config::Limits& limits = (*runtime_.held())->config->gateway.limits;
    for (Session* s : sessions_)
      s->ApplyLimits(limits);
  });
}

void Worker::StopAccepting() {
  net::post(*ioc_, [this] {
    accepting_ = false;
    boost::system::error_code ec;
    for (auto& [acceptor, spec] : acceptors_)
      acceptor.close(ec);
    // Idle keep-alive connections close now; busy ones after their response.
    std::vector<Session*> idle;
    for (Session* s : sessions_)
      if (s->idle()) idle.push_back(s);
    for (Session* s : idle)
      s->Close();
  });
}

void Worker::CloseAll() {
  net::post(*ioc_, [this] {
    std::vector<Session*> all(sessions_.begin(), sessions_.end());
    for (Session* s : all)
      s->Close();
  });
}

void Worker::CloseOldestIdle() {
  IdleHook* oldest = idle_sessions_.Oldest();
  if (oldest == nullptr) return;  // it went busy since the decision
  metrics_.connections_evicted++;
  static_cast<Session*>(oldest)->Close();
}

void Worker::PostCloseOldestIdle() {
  net::post(*ioc_, [this] { CloseOldestIdle(); });
}

void Worker::Stop() {
  if (!thread_.joinable()) return;
  net::post(*ioc_, [this] {
    log_.Flush();
    pool_.Clear();
    ioc_->stop();
  });
  thread_.join();
}

void Worker::ScheduleHousekeeping() {
  housekeeping_->expires_after(kHousekeepingInterval);
  housekeeping_->async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    log_.Flush();
    const Runtime& rt = **runtime_.held();
    const health::MonotonicTime now = time_.monotonic();
    pool_.Sweep(now, *rt.config);
    ParkIdleSessions(now, rt.config->gateway.limits.park_after);
    ScheduleHousekeeping();
  });
}

// A connection idle for park_after parks (Session::RequestPark): it frees
// its coroutine frames, and its client's next request pays for starting
// them again, once per idle spell (bench/RESULTS.md, "Idle connections
// park"). Clients that send back to back never wait this long.
void Worker::ParkIdleSessions(health::MonotonicTime now, health::Millis park_after) {
  if (park_after.count() == 0) return;
  idle_sessions_.TakeIdleSince(health::ToNanos(now - park_after),
                               [](IdleHook& h) { static_cast<Session&>(h).RequestPark(); });
}

net::awaitable<void> Worker::AcceptLoop(size_t index) {
  auto& [acceptor, spec] = acceptors_[index];
  net::steady_timer backoff(*ioc_);
  net::ip::tcp::endpoint peer;  // from accept4 itself: no getpeername per connection
  while (acceptor.is_open()) {
    auto [ec, socket] = co_await acceptor.async_accept(peer, common::kAwait);
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) break;
      // Out of file descriptors or similar: back off briefly, keep serving.
      common::LogWarn("accept", ec.message());
      backoff.expires_after(std::chrono::milliseconds(10));
      co_await backoff.async_wait(common::kAwait);
      continue;
    }
    const auto& limits = (*runtime_.held())->config->gateway.limits;
    Admission admit;
    const int64_t open = shared_.open_connections.load(std::memory_order_relaxed);
    // Below the limit (nearly every accept) nothing else is read: the other
    // workers' idle-list lines are touched only when someone must make room.
    if (limits.max_connections != 0 && open >= static_cast<int64_t>(limits.max_connections)) {
      absl::InlinedVector<int64_t, 16> oldest;
      for (const Worker* w : shared_.workers)
        oldest.push_back(w->oldest_idle_ns());
      if (shared_.workers.empty()) oldest.push_back(oldest_idle_ns());
      admit = Admit(open, limits.max_connections, oldest, shared_.workers.empty() ? 0 : id_);
    }
    switch (admit.kind) {
      case Admission::Kind::kAdmit:
        break;
      case Admission::Kind::kEvictIdle:
        // The new connection is admitted now; the one it replaces closes in
        // a moment (on its own worker's thread when it lives elsewhere).
        if (shared_.workers.empty() || admit.worker == id_)
          CloseOldestIdle();
        else
          shared_.workers[admit.worker]->PostCloseOldestIdle();
        break;
      case Admission::Kind::kRefuse:
        metrics_.connections_rejected++;
        if (refusals_in_flight_ >= kMaxRefusalsInFlight) continue;  // closes the socket
        SpawnRefusal(*this, std::move(socket), peer, spec, ErrorKind::kConnectionLimit);
        continue;
    }
    SpawnSession(*this, std::move(socket), peer, spec);
  }
}

}  // namespace geogate::proxy
