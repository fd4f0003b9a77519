// Reads from backend sockets that try the socket only when it can have
// bytes, as HAProxy and NGINX do: readiness kept outside Asio's reactor.
//
// Asio tries every read at once (a non-blocking recv) and takes only the end
// of a stream as a sign that a socket is drained, so a read started right
// after a request was sent, or after a short read of a stream, first costs
// an empty recvmsg (EAGAIN). A wait that does not read (async_wait) costs an
// epoll_ctl instead. Either way that is one system call per plain request
// and about one per four streamed tokens, the whole gap in system calls to
// HAProxy (bench/RESULTS.md, "Next, in order of expected gain", item 1).
//
// A ReadySet is a worker's second epoll set, edge-triggered, holding its
// plain backend sockets from their connect on. A socket is *drained* after
// a read that returned fewer bytes than asked for (or nothing): its next
// read waits in this set without trying the socket, and the kernel queues
// the socket on the set's ready list when bytes (or the end) arrive. The
// set's descriptor is one Asio descriptor; while reads wait, one async_wait
// is armed on it, and when it fires, one epoll_wait harvests every socket
// that turned readable (a *harvest*) and does their reads. So instead of an
// empty read per socket, the worker pays an epoll_ctl (the arming) and an
// epoll_wait per harvest, which wins when two or more sockets turn ready
// per harvest, as they do under load.
//
// A read completes as Asio's would: through the handler's associated
// executor (a relay bound to the worker's BulkQueue runs from there), never
// inside the call that starts it, with net::error::eof at the end of the
// stream and operation_aborted when cancelled (Cancel: what closing or
// interrupting the Stream does). One thread only: the worker's.
//
// The A/B of bench/ab builds the gateway once with GEOGATE_AB_NO_READY_SET:
// the upstream pool then registers no socket, and every backend read is
// Asio's own.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/assert.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/system/error_code.hpp>

#include "common/block_cache.h"

namespace geogate::proxy {

namespace net = boost::asio;

class ReadySet {
  struct Op;

 public:
  /// One socket's place in a set. It lives as long as the socket and must
  /// not move while registered (the set's events point at it); the socket
  /// must close when it dies (closing takes the socket out of the set).
  class Entry {
   public:
    Entry() = default;
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    ~Entry() { BOOST_ASSERT(op_ == nullptr); }
    /// The set it was added to; null before.
    ReadySet* set() const { return set_; }
    /// False while the socket is known to be drained.
    bool ready() const { return ready_; }

   private:
    friend class ReadySet;
    ReadySet* set_ = nullptr;
    Op* op_ = nullptr;  // the read waiting for the socket, if any
    bool ready_ = false;
  };

  /// What the set did, for tests and the A/B.
  struct Counts {
    uint64_t reads = 0;        // recv calls
    uint64_t empty_reads = 0;  // of them, EAGAIN
    uint64_t harvests = 0;     // epoll_wait calls on the set
    uint64_t arms = 0;         // async_waits armed (an epoll_ctl each)
  };

  /// Without an epoll set of its own (epoll_create1 failed) the set
  /// registers nothing, and every read stays Asio's.
  explicit ReadySet(net::io_context& ioc);
  ~ReadySet();
  ReadySet(const ReadySet&) = delete;
  ReadySet& operator=(const ReadySet&) = delete;

  /// Adds the connected socket `fd`, as drained (bytes already there are
  /// reported by the kernel at once). @return false when it could not be
  /// added: its reads then stay Asio's.
  bool Add(Entry& e, int fd);

  /// Reads at most `buf.size()` bytes from `fd`, the socket of `e`;
  /// completes with (error_code, bytes) like async_read_some. `fd` is the
  /// socket's current handle: -1 after a close completes with
  /// bad_descriptor. At most one read per entry at a time.
  template <class Token>
  auto AsyncRead(Entry& e, int fd, net::mutable_buffer buf, Token&& token) {
    return net::async_initiate<Token, void(boost::system::error_code, size_t)>(
        [this, &e, fd, buf](auto handler) { Start(e, fd, buf, std::move(handler)); }, token);
  }

  /// Ends the entry's waiting read, if any, with operation_aborted.
  void Cancel(Entry& e);

  /// Before the io_context goes: closes the set's descriptor and destroys
  /// waiting reads without running them (as the io_context does with its
  /// own operations). Entries stay valid; later reads end with
  /// operation_aborted. The armed wait it cancels is the io_context's: the
  /// set must outlive the io_context's last run.
  void Shutdown();

  const Counts& counts() const { return counts_; }

 private:
  struct Op {
    Op* prev = nullptr;
    Op* next = nullptr;
    Entry* entry = nullptr;
    int fd = -1;
    net::mutable_buffer buf;
    // Completes the handler through `set` (null: only destroys it), and
    // frees the node first.
    void (*take)(Op*, ReadySet* set, boost::system::error_code, size_t) = nullptr;
  };
  template <class Handler>
  struct OpOf : Op {
    explicit OpOf(Handler&& h) : handler(std::move(h)) { take = &Take; }
    static void Take(Op* o, ReadySet* set, boost::system::error_code ec, size_t n) {
      auto* self = static_cast<OpOf*>(o);
      Handler h(std::move(self->handler));
      self->~OpOf();
      common::block_cache::Deallocate(self, sizeof(OpOf));
      if (set != nullptr) set->Complete(std::move(h), ec, n);
    }
    Handler handler;
  };

  /// Completion as Asio's: posted to the handler's executor (the worker's
  /// io_context unless it names another).
  template <class Handler>
  void Complete(Handler h, boost::system::error_code ec, size_t n) {
    auto ex = net::get_associated_executor(h, ioc_.get_executor());
    net::post(ex, boost::beast::bind_front_handler(std::move(h), ec, n));
  }

  /// One recv into `buf`. @return false when it would block (the entry is
  /// drained); otherwise `ec` and `n` are the read's result.
  bool TryRead(Entry& e, int fd, net::mutable_buffer buf, boost::system::error_code& ec, size_t& n);

  template <class Handler>
  void Start(Entry& e, int fd, net::mutable_buffer buf, Handler handler) {
    BOOST_ASSERT(e.op_ == nullptr);
    boost::system::error_code ec;
    size_t n = 0;
    if (fd < 0 || epfd_ < 0) {  // closed, or the worker shuts down
      Complete(std::move(handler),
               fd < 0 ? net::error::bad_descriptor : net::error::operation_aborted, 0);
      return;
    }
    if (e.ready_ && TryRead(e, fd, buf, ec, n)) {
      Complete(std::move(handler), ec, n);
      return;
    }
    using Node = OpOf<Handler>;
    Node* op = new (common::block_cache::Allocate(sizeof(Node))) Node(std::move(handler));
    op->entry = &e;
    op->fd = fd;
    op->buf = buf;
    e.op_ = op;
    Link(op);
    Arm();
  }

  void Link(Op* op);
  void Unlink(Op* op);
  void Arm();
  void Harvest(boost::system::error_code ec);

  net::io_context& ioc_;
  int epfd_ = -1;
  // epfd_ as Asio sees it; reset by Shutdown, before the io_context goes.
  std::optional<net::posix::stream_descriptor> desc_;
  Op* waiting_ = nullptr;  // reads waiting, a list through Op::next
  bool armed_ = false;
  Counts counts_;
};

}  // namespace geogate::proxy
