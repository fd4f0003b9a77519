// Fixed-size byte buffers recycled within one worker. A proxied request
// needs a 16 KiB relay buffer; taking it from malloc on every request (too
// big for glibc's per-thread cache) cost more than the request's other
// allocations together. Worker-thread only: no lock.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace geogate::gateway {

class BufferPool {
 public:
  /// `bytes` per buffer; at most `keep` idle buffers are kept (the rest are
  /// freed, so a burst does not pin its peak memory for good).
  BufferPool(size_t bytes, size_t keep) : bytes_(bytes), keep_(keep) {}

  /// A buffer returned to the pool when it goes out of scope. The pool must
  /// outlive it.
  class Lease {
   public:
    Lease(BufferPool& pool, std::unique_ptr<char[]> buf) : pool_(&pool), buf_(std::move(buf)) {}
    Lease(Lease&& o) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease() {
      if (buf_) pool_->Give(std::move(buf_));
    }
    char* data() const { return buf_.get(); }
    size_t size() const { return pool_->bytes_; }

   private:
    BufferPool* pool_;
    std::unique_ptr<char[]> buf_;
  };

  Lease Take() {
    if (free_.empty()) return Lease(*this, std::make_unique_for_overwrite<char[]>(bytes_));
    std::unique_ptr<char[]> b = std::move(free_.back());
    free_.pop_back();
    return Lease(*this, std::move(b));
  }
  size_t idle() const { return free_.size(); }

 private:
  void Give(std::unique_ptr<char[]> b) {
    if (free_.size() < keep_) free_.push_back(std::move(b));
  }

  size_t bytes_;
  size_t keep_;
  std::vector<std::unique_ptr<char[]>> free_;
};

}  // namespace geogate::gateway
