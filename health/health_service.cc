// The production HealthService: a dedicated thread running an io_context on
// which the HealthChecker (HTTP probes), the OutlierDetector and the stats
// live. Everything else talks to it by posting onto that thread.
#include "health/health_service.h"

#include <atomic>
#include <random>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "health/asio_timer.h"
#include "health/health_checker.h"
#include "health/health_stats.h"
#include "health/http_probe_client.h"
#include "health/outlier_detector.h"

namespace geogate::health {
namespace {

namespace asio = boost::asio;

class HealthServiceImpl final : public HealthService {
 public:
  explicit HealthServiceImpl(Options options)
      : options_(std::move(options)),
        work_(asio::make_work_guard(io_)),
        timers_(io_),
        probes_(io_),
        rng_(std::random_device{}()),
        checker_(
            time_, timers_, probes_, [this] { return rng_(); },
            HealthChecker::Hooks{
                [this](const BackendState& s, const StateChange& c) { OnChange(s, c); },
                [this](BackendState& s, const ProbeResult& r, MonotonicTime started) {
                  stats_.RecordProbe(s, r);
                  if (r.ok) detector_.OnProbeSuccess(s, started);
                }}),
        detector_(time_, OutlierDetector::Hooks{[this](BackendState& s, FailureReason reason) {
                                                  checker_.MarkUnhealthy(s, reason);
                                                },
                                                [this](const BackendState& s,
                                                       const StateChange& c) { OnChange(s, c); }}) {
  }

  ~HealthServiceImpl() override { Stop(); }

  // health::HealthService
  void Start() override {
    bool expected = false;
    if (stopped_.load() || !started_.compare_exchange_strong(expected, true)) return;
    thread_ = std::thread([this] {
      // Handlers do not throw by design; a bug that does should not end the
      // process silently from this thread, so let it propagate (terminate).
      io_.run();
    });
  }

  void Stop() override {
    bool expected = false;
    if (!stopped_.compare_exchange_strong(expected, true)) return;
    if (thread_.joinable()) {
      // Tear down on the health thread, where the sessions live, then end it.
      asio::post(io_, [this] {
        checker_.stop();
        io_.stop();
      });
      thread_.join();
    } else {
      checker_.stop();  // never started: nothing runs concurrently
    }
  }

  void Update(config::SnapshotConstPtr snapshot, std::vector<BackendStatePtr> states) override {
    if (stopped_.load() || !snapshot) return;
    asio::post(io_, [this, snapshot = std::move(snapshot), states = std::move(states)] {
      stats_.update(*snapshot, states);
      detector_.update(*snapshot, states);
      checker_.update(*snapshot, states);
    });
  }

  void ReportFailure(const BackendStatePtr& state, FailureReason reason) override {
    if (stopped_.load(std::memory_order_relaxed) || !state) return;
    asio::post(io_, [this, state, reason] { detector_.ReportFailure(*state, reason); });
  }

  std::vector<BackendHealthStats> Stats() const override { return stats_.snapshot(); }

 private:
  void OnChange(const BackendState& state, const StateChange& change) {
    stats_.RecordChange(state, change);
    if (options_.on_change) options_.on_change(change);
  }

  Options options_;
  // io_ first: destroyed last, after everything holding its handlers.
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  RealTimeSource time_;
  AsioTimerFactory timers_;
  HttpProbeClientFactory probes_;
  std::mt19937_64 rng_;
  HealthStats stats_;
  HealthChecker checker_;
  OutlierDetector detector_;
  std::thread thread_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
};

}  // namespace

std::unique_ptr<HealthService> HealthService::Create(Options options) {
  return std::make_unique<HealthServiceImpl>(std::move(options));
}

}  // namespace geogate::health
