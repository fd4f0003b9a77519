#include "common/bulk_queue.h"

#include <algorithm>

#include <boost/asio/post.hpp>

namespace geogate::common {

BulkQueue::Node* BulkQueue::Pop() {
  Node* n = head_;
  if (n == nullptr) return nullptr;
  head_ = n->next;
  if (head_ == nullptr) tail_ = nullptr;
  --size_;
  return n;
}

void BulkQueue::Clear() {
  while (Node* n = Pop())
    n->take(n, /*invoke=*/false);
}

// Posted, the drain goes to the back of the worker's ready queue: between two
// batches everything else that is ready runs, and the worker polls its
// sockets once (Asio's scheduler keeps its poll as one entry of that queue).
void BulkQueue::Schedule() {
  scheduled_ = true;
  net::post(ioc_, [this] { Drain(); });
}

void BulkQueue::Drain() {
  scheduled_ = false;
  // What is left goes after the next poll, also when an item throws (the
  // worker logs it and runs on). The next batch is posted after this one
  // ran, so what its items posted goes first.
  draining_ = true;
  struct Rest {
    BulkQueue& q;
    ~Rest() {
      q.draining_ = false;
      if (q.size_ > 0 && !q.scheduled_) q.Schedule();
    }
  } rest{*this};
  // Only what was queued before this batch began: an item queued by one
  // that runs now waits for the next batch.
  size_t n = std::min(batch_, size_);
  for (size_t i = 0; i < n; ++i) {
    Node* item = Pop();
    item->take(item, /*invoke=*/true);
  }
}

}  // namespace geogate::common
