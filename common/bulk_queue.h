// A worker's second, lower-priority run queue: the relay of streams that
// already flow. Asio runs a worker's ready handlers in arrival order, so
// under load a new request's next step waits behind every token relay that
// became ready in the same pass. Completions bound to BulkQueue's executor
// are queued here instead, and run at most `batch` at a time, with a pass
// of the worker's ready queue and one poll of its sockets between batches:
// everything else (accepts, request heads, routing, the first byte of an
// answer) waits for a batch or two, not for all streams.
//
// The A/B of bench/ab builds the gateway once with GEOGATE_AB_NO_BULK_QUEUE:
// Push then posts `f` to the worker's ready queue, in arrival order with
// everything else, as without this queue.
//
// What the batching buys rests on how Asio's scheduler orders its work (a
// post goes to the back of the ready queue, and the reactor's poll is one
// entry of that queue, so it runs between two batches), which is not part
// of Asio's interface. It was read for Boost 1.81 only: any other Boost
// version is a build error (below), so the queue cannot silently stop
// paying while it still costs a node and a post per batch. It holds for
// Asio's io_uring reactor too (bench/ab's IO_URING variant): the
// scheduler is the same code for epoll and io_uring, only its task differs
// (epoll_reactor::run or io_uring_service::run, scheduler::get_default_task),
// and either hands what completed (at most 128 per poll) to do_run_one,
// which queues it, then the task again, at the back of op_queue_. With
// io_uring the poll between two batches is a look at the completion ring
// (no system call), and the reads a batch starts are submitted together
// by one more queued entry (io_uring_service's submit_sqes_op).
#pragma once

#include <boost/version.hpp>

#if BOOST_VERSION != 108100
// Read boost/asio/detail/impl/scheduler.ipp (do_run_one: the task
// operation's place in op_queue_, post_immediate_completion) again for the
// new version, and re-run the TTFT A/B of bench/RESULTS.md, then widen
// this check.
#error "common/bulk_queue.h supports only Boost 1.81 (see the comment above this line)"
#endif

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include <boost/asio/execution.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "common/block_cache.h"

namespace geogate::common {

namespace net = boost::asio;

class BulkQueue {
 public:
  /// `batch`: items run per pass of the worker's queue when streams back
  /// up (`[gateway.upstream] relay_batch`).
  BulkQueue(net::io_context& ioc, size_t batch) : ioc_(ioc), batch_(batch == 0 ? 1 : batch) {}
  BulkQueue(const BulkQueue&) = delete;
  BulkQueue& operator=(const BulkQueue&) = delete;
  /// Destroys what never ran (with it, the coroutines waiting on it). A
  /// drain already posted must not run after this: destroy the queue
  /// while its io_context does not run (the worker does so after stopping).
  ~BulkQueue() { Clear(); }

  /// Queues `f` to run after what is ready now; worker thread only.
  template <class F>
  void Push(F&& f) {
#ifdef GEOGATE_AB_NO_BULK_QUEUE
    // Not net::post: that would follow f's associated executor, this one.
    net::require(ioc_.get_executor(), net::execution::blocking.never).execute(std::forward<F>(f));
    return;
#endif
    using Item = ItemOf<std::decay_t<F>>;
    Node* n = new (block_cache::Allocate(sizeof(Item))) Item(std::forward<F>(f));
    if (tail_ != nullptr)
      tail_->next = n;
    else
      head_ = n;
    tail_ = n;
    ++size_;
    if (!scheduled_ && !draining_) Schedule();
  }

  /// Destroys every queued item without running it.
  void Clear();
  size_t size() const {
    return size_;
  }
  size_t batch() const {
    return batch_;
  }
  void set_batch(size_t batch) {
    batch_ = batch == 0 ? 1 : batch;
  }

  /// An Asio executor: a completion handler bound to it
  /// (net::bind_executor) runs from this queue.
  class Executor {
   public:
    explicit Executor(BulkQueue* q) noexcept : q_(q) {}
    template <class F>
    void execute(F&& f) const {
      q_->Push(std::forward<F>(f));
    }
    // It never runs a function inline, which is what Beast's streams require.
    Executor require(net::execution::blocking_t::never_t) const noexcept { return *this; }
    static constexpr net::execution::blocking_t query(net::execution::blocking_t) noexcept {
      return net::execution::blocking.never;
    }
    bool operator==(const Executor& o) const noexcept { return q_ == o.q_; }
    bool operator!=(const Executor& o) const noexcept { return q_ != o.q_; }

   private:
    BulkQueue* q_;
  };
  Executor executor() noexcept {
    return Executor(this);
  }

 private:
  struct Node {
    Node* next = nullptr;
    // Runs (invoke) or only destroys the item, and frees its block first.
    void (*take)(Node*, bool invoke) = nullptr;
  };
  template <class F>
  struct ItemOf : Node {
    explicit ItemOf(F&& fn) : f(std::move(fn)) { take = &Take; }
    explicit ItemOf(const F& fn) : f(fn) { take = &Take; }
    static void Take(Node* n, bool invoke) {
      auto* self = static_cast<ItemOf*>(n);
      F fn(std::move(self->f));
      self->~ItemOf();
      block_cache::Deallocate(self, sizeof(ItemOf));
      if (invoke) std::move(fn)();
    }
    F f;
  };

  Node* Pop();
  void Schedule();
  void Drain();

  net::io_context& ioc_;
  size_t batch_;
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
  size_t size_ = 0;
  bool scheduled_ = false;
  bool draining_ = false;  // a batch runs: the next is scheduled after it
};

}  // namespace geogate::common
