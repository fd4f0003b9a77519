#include "proxy/ready_set.h"

#include <unistd.h>

#include <array>

namespace geogate::proxy {

namespace {
// Events taken per epoll_wait of a harvest; a full batch is followed by
// another.
constexpr int kHarvestEvents = 64;
}  // namespace

ReadySet::ReadySet(net::io_context& ioc) : ioc_(ioc) {
  int fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return;
  boost::system::error_code ec;
  desc_.emplace(ioc);
  desc_->assign(fd, ec);
  if (ec) {
    desc_.reset();
    ::close(fd);
    return;
  }
  epfd_ = fd;
}

ReadySet::~ReadySet() {
  Shutdown();
}

bool ReadySet::Add(Entry& e, int fd) {
  if (epfd_ < 0 || fd < 0) return false;
  epoll_event ev{};
  // EPOLLIN also reports the end of the stream; errors and hang-ups are
  // reported whatever is asked.
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = &e;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) return false;
  e.set_ = this;
  e.ready_ = false;
  return true;
}

bool ReadySet::TryRead(Entry& e, int fd, net::mutable_buffer buf, boost::system::error_code& ec,
                       size_t& n) {
  ++counts_.reads;
  ssize_t got;
  do {
    got = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
  } while (got < 0 && errno == EINTR);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    ++counts_.empty_reads;
    e.ready_ = false;
    return false;
  }
  if (got < 0) {
    ec.assign(errno, boost::system::system_category());
    n = 0;
    return true;
  }
  n = static_cast<size_t>(got);
  // Fewer bytes than asked: the socket had no more, and any that arrive
  // now queue it on the set's ready list. The end of the stream stays
  // readable.
  if (n < buf.size() && n != 0) e.ready_ = false;
  if (n == 0 && buf.size() != 0) ec = net::error::eof;
  return true;
}

void ReadySet::Cancel(Entry& e) {
  Op* op = e.op_;
  if (op == nullptr) return;
  e.op_ = nullptr;
  Unlink(op);
  op->take(op, this, net::error::operation_aborted, 0);
}

void ReadySet::Shutdown() {
  if (epfd_ < 0) return;
  // Closes epfd_. The armed wait, if any, is the io_context's to destroy
  // (unrun, it is going) or to run (Harvest returns at once).
  desc_.reset();
  epfd_ = -1;
  armed_ = false;
  // Destroying a waiting read's handler destroys the coroutine that waits,
  // whose connection's Entry may come back here (Cancel): each is detached
  // before it is destroyed.
  while (Op* op = waiting_) {
    Unlink(op);
    op->entry->op_ = nullptr;
    op->take(op, nullptr, {}, 0);
  }
}

void ReadySet::Link(Op* op) {
  op->prev = nullptr;
  op->next = waiting_;
  if (waiting_ != nullptr) waiting_->prev = op;
  waiting_ = op;
}

void ReadySet::Unlink(Op* op) {
  if (op->prev != nullptr)
    op->prev->next = op->next;
  else
    waiting_ = op->next;
  if (op->next != nullptr) op->next->prev = op->prev;
  op->prev = op->next = nullptr;
}

void ReadySet::Arm() {
  if (armed_ || epfd_ < 0) return;
  armed_ = true;
  ++counts_.arms;
  desc_->async_wait(net::posix::stream_descriptor::wait_read,
                    [this](boost::system::error_code ec) { Harvest(ec); });
}

void ReadySet::Harvest(boost::system::error_code ec) {
  armed_ = false;
  if (ec || epfd_ < 0) return;  // closed (Shutdown)
  std::array<epoll_event, kHarvestEvents> events;
  for (;;) {
    ++counts_.harvests;
    int got = ::epoll_wait(epfd_, events.data(), kHarvestEvents, 0);
    if (got < 0 && errno == EINTR) continue;
    // No code runs between the epoll_wait and the last event's read below
    // (completions are posted), so every entry an event points at is alive:
    // a socket's entry dies only with its socket, which leaves the set.
    for (int i = 0; i < got; ++i) {
      Entry& e = *static_cast<Entry*>(events[i].data.ptr);
      e.ready_ = true;
      Op* op = e.op_;
      if (op == nullptr) continue;  // read when it is next asked for
      boost::system::error_code rec;
      size_t n = 0;
      if (!TryRead(e, op->fd, op->buf, rec, n)) continue;  // spurious: it waits on
      e.op_ = nullptr;
      Unlink(op);
      op->take(op, this, rec, n);
    }
    if (got < kHarvestEvents) break;
  }
  if (waiting_ != nullptr) Arm();
}

}  // namespace geogate::proxy
