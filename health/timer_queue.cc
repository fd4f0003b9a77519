#include "health/timer_queue.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace geogate::health {
namespace {
constexpr size_t kNotArmed = std::numeric_limits<size_t>::max();
}  // namespace

class TimerQueue::Entry final : public Timer {
 public:
  Entry(TimerQueue& q, std::function<void()> cb) : q_(q), cb_(std::move(cb)) { ++q_.live_; }
  ~Entry() override {
    if (index_ != kNotArmed) q_.Disarm(this);
    --q_.live_;
  }

  // health::Timer
  void enable(Millis after) override {
    q_.Arm(this, q_.time_.monotonic() + std::max(after, Millis(0)));
  }
  // The heap keeps deadlines: no clock read (only WakeBy reads one, when
  // the base must be re-armed earlier).
  void enable_at(MonotonicTime at, const TimeSource&) override { q_.Arm(this, at); }
  void disable() override {
    if (index_ != kNotArmed) q_.Disarm(this);
  }
  bool enabled() const override { return index_ != kNotArmed; }

 private:
  friend class TimerQueue;
  bool Before(const Entry& o) const { return at_ < o.at_ || (at_ == o.at_ && seq_ < o.seq_); }

  TimerQueue& q_;
  std::function<void()> cb_;
  MonotonicTime at_{};
  uint64_t seq_ = 0;
  size_t index_ = kNotArmed;  // in q_.heap_
};

TimerQueue::TimerQueue(TimerFactory& base, const TimeSource& time)
    : time_(time), base_(base.create([this] { Fire(); })) {}

TimerQueue::~TimerQueue() {
  assert(live_ == 0 && "a TimerQueue's timers must go before it");
}

TimerPtr TimerQueue::create(std::function<void()> cb) {
  return std::make_unique<Entry>(*this, std::move(cb));
}

void TimerQueue::Shutdown() {
  base_.reset();
  base_armed_ = false;
}

void TimerQueue::Arm(Entry* e, MonotonicTime at) {
  e->at_ = at;
  e->seq_ = ++arm_seq_;
  if (e->index_ == kNotArmed) {
    e->index_ = heap_.size();
    heap_.push_back(e);
    SiftUp(e->index_);
  } else {
    // Later or earlier than before: one of the two sifts moves it.
    SiftUp(e->index_);
    SiftDown(e->index_);
  }
  if (!firing_) WakeBy(at);
}

void TimerQueue::WakeBy(MonotonicTime at) {
  if (base_ == nullptr || (base_armed_ && base_at_ <= at)) return;
  base_armed_ = true;
  base_at_ = at;
  // The base counts whole milliseconds: round up, so it never wakes before
  // the entry is due (an early wake would only sleep again).
  base_->enable(std::max(std::chrono::ceil<Millis>(at - time_.monotonic()), Millis(0)));
}

void TimerQueue::Disarm(Entry* e) {
  // The base stays armed: if e was the earliest, its wake finds nothing due
  // and sleeps until the next entry (cheaper than a cancel per disarm).
  const size_t i = e->index_;
  e->index_ = kNotArmed;
  Entry* last = heap_.back();
  heap_.pop_back();
  if (last == e) return;
  Place(last, i);
  SiftUp(i);
  SiftDown(last->index_);
}

void TimerQueue::Fire() {
  base_armed_ = false;
  const MonotonicTime now = time_.monotonic();
  // Only entries armed before this wake fire in it: one that a callback arms
  // (even for now) waits for the next, so a callback that keeps re-arming
  // itself cannot hold the loop. The base is re-armed once, after it.
  const uint64_t armed_before = arm_seq_;
  firing_ = true;
  while (!heap_.empty() && heap_.front()->at_ <= now && heap_.front()->seq_ <= armed_before) {
    Entry* e = heap_.front();
    Disarm(e);
    // Copy: the callback may destroy (or re-arm) its own timer.
    std::function<void()> cb = e->cb_;
    if (cb) cb();
  }
  firing_ = false;
  if (!heap_.empty()) WakeBy(heap_.front()->at_);
}

void TimerQueue::Place(Entry* e, size_t i) {
  heap_[i] = e;
  e->index_ = i;
}

void TimerQueue::SiftUp(size_t i) {
  Entry* e = heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!e->Before(*heap_[parent])) break;
    Place(heap_[parent], i);
    i = parent;
  }
  Place(e, i);
}

void TimerQueue::SiftDown(size_t i) {
  Entry* e = heap_[i];
  const size_t n = heap_.size();
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1]->Before(*heap_[child])) ++child;
    if (!heap_[child]->Before(*e)) break;
    Place(heap_[child], i);
    i = child;
  }
  Place(e, i);
}

}  // namespace geogate::health
