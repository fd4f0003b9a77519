#include "testing/simulated_time.h"

#include <algorithm>

namespace geogate::health {

class SimulatedTime::SimTimer final : public Timer {
 public:
  SimTimer(SimulatedTime& owner, std::function<void()> cb) : owner_(&owner), cb_(std::move(cb)) {
    owner_->add(this);
  }
  ~SimTimer() override {
    if (owner_ != nullptr) owner_->remove(this);
  }

  // health::Timer
  void enable(Millis after) override {
    deadline_ = owner_->now_ + std::max(after, Millis(0));
    seq_ = ++owner_->arm_seq_;
    enabled_ = true;
  }
  void disable() override { enabled_ = false; }
  bool enabled() const override { return enabled_; }

 private:
  friend class SimulatedTime;
  SimulatedTime* owner_;
  std::function<void()> cb_;
  MonotonicTime deadline_{};
  uint64_t seq_ = 0;
  bool enabled_ = false;
};

SimulatedTime::SimulatedTime()
    : now_(MonotonicTime(std::chrono::hours(1))),
      system_start_(std::chrono::system_clock::now()),
      monotonic_start_(now_) {}

SimulatedTime::~SimulatedTime() {
  // Timers that outlive the clock must not reach back into it.
  for (SimTimer* t : timers_)
    t->owner_ = nullptr;
}

SystemTime SimulatedTime::system() const {
  return system_start_ + std::chrono::duration_cast<SystemTime::duration>(now_ - monotonic_start_);
}

TimerPtr SimulatedTime::create(std::function<void()> cb) {
  return std::make_unique<SimTimer>(*this, std::move(cb));
}

void SimulatedTime::remove(SimTimer* t) {
  timers_.erase(std::remove(timers_.begin(), timers_.end(), t), timers_.end());
}

void SimulatedTime::advance(Millis d) {
  SetMonotonic(now_ + std::max(d, Millis(0)));
}

void SimulatedTime::SetMonotonic(MonotonicTime target) {
  if (target < now_) target = now_;
  for (;;) {
    // Linear scan: tests hold tens of timers, and callbacks may create or
    // destroy timers, so nothing is cached across iterations.
    SimTimer* next = nullptr;
    for (SimTimer* t : timers_) {
      if (!t->enabled_ || t->deadline_ > target) continue;
      if (next == nullptr || t->deadline_ < next->deadline_ ||
          (t->deadline_ == next->deadline_ && t->seq_ < next->seq_))
        next = t;
    }
    if (next == nullptr) break;
    now_ = std::max(now_, next->deadline_);
    next->enabled_ = false;
    // Copy: the callback may destroy its own timer.
    std::function<void()> cb = next->cb_;
    cb();
  }
  now_ = target;
}

bool SimulatedTime::AdvanceUntil(const std::function<bool()>& done, Millis limit, Millis step) {
  const MonotonicTime end = now_ + limit;
  while (!done()) {
    if (now_ >= end) return false;
    SetMonotonic(std::min(now_ + std::max(step, Millis(1)), end));
  }
  return true;
}

size_t SimulatedTime::enabled_timers() const {
  return static_cast<size_t>(
      std::count_if(timers_.begin(), timers_.end(), [](const SimTimer* t) { return t->enabled_; }));
}

}  // namespace geogate::health
