// Admission control shared by all workers: at most N generations at once,
// the rest wait in one FIFO queue across threads, beyond a queue limit 429.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

namespace gpusim {

class ConcurrencyLimiter {
 public:
  /// A queued request. Its timer never expires on its own: the limiter
  /// cancels it (on the waiter's own executor) to hand over a slot.
  struct Waiter {
    explicit Waiter(const boost::asio::any_io_executor& ex)
        : wake(ex, boost::asio::steady_timer::time_point::max()) {}
    boost::asio::steady_timer wake;
    std::atomic<bool> granted{false};
    bool abandoned = false;  // guarded by the limiter's mutex
  };
  using WaiterPtr = std::shared_ptr<Waiter>;

  enum class Admission { kRunning, kQueued, kRejected };

  /// @param max_running 0 = unlimited. @param queue_limit 0 = unlimited.
  ConcurrencyLimiter(int64_t max_running, int64_t queue_limit)
      : max_running_(max_running), queue_limit_(queue_limit) {}

  /// kRunning: the caller holds a slot. kQueued: `waiter` is set and the
  /// caller waits on waiter->wake until waiter->granted. kRejected: 429.
  Admission admit(const boost::asio::any_io_executor& ex, WaiterPtr& waiter);

  /// Gives up a queued place. Returns false when the slot was granted in the
  /// meantime: the caller then holds it and must release() it.
  bool abandon(Waiter& waiter);

  /// Frees a slot, or hands it straight to the oldest live waiter.
  void release();

  int64_t running() const { return running_.load(std::memory_order_relaxed); }
  int64_t waiting() const { return waiting_.load(std::memory_order_relaxed); }
  /// running / max (or / 64 when unlimited), in 0..1.
  double utilization() const;

 private:
  const int64_t max_running_;
  const int64_t queue_limit_;
  std::mutex mu_;
  std::deque<WaiterPtr> queue_;
  std::atomic<int64_t> running_{0};
  std::atomic<int64_t> waiting_{0};
};

}  // namespace gpusim
