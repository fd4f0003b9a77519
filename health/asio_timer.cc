#include "health/asio_timer.h"

#include <boost/asio/steady_timer.hpp>

namespace geogate::health {
namespace {

// What a pending wait needs after the timer object is gone: destroying or
// re-arming a steady_timer cannot recall a completion that is already queued
// with success, so each wait carries the generation it was armed for and the
// callback only runs when that is still the current one.
struct TimerShared {
  std::function<void()> cb;
  uint64_t generation = 0;
  bool enabled = false;
};

class AsioTimer final : public Timer {
 public:
  AsioTimer(boost::asio::io_context& io, std::function<void()> cb)
      : timer_(io), shared_(std::make_shared<TimerShared>()) {
    shared_->cb = std::move(cb);
  }
  ~AsioTimer() override {
    ++shared_->generation;
    shared_->enabled = false;
    shared_->cb = nullptr;
  }

  // health::Timer
  void enable(Millis after) override {
    const uint64_t generation = ++shared_->generation;
    shared_->enabled = true;
    timer_.expires_after(std::max(after, Millis(0)));
    timer_.async_wait([shared = shared_, generation](const boost::system::error_code& ec) {
      if (ec || shared->generation != generation || !shared->enabled) return;
      shared->enabled = false;
      // Copy: the callback may destroy (or re-arm) this timer.
      std::function<void()> cb = shared->cb;
      if (cb) cb();
    });
  }
  void disable() override {
    ++shared_->generation;
    shared_->enabled = false;
    timer_.cancel();
  }
  bool enabled() const override { return shared_->enabled; }

 private:
  boost::asio::steady_timer timer_;
  std::shared_ptr<TimerShared> shared_;
};

}  // namespace

TimerPtr AsioTimerFactory::create(std::function<void()> cb) {
  return std::make_unique<AsioTimer>(io_, std::move(cb));
}

}  // namespace geogate::health
