// Fixed-size byte buffers recycled within one worker. A proxied request
// needs a 16 KiB relay buffer; taking it from malloc on every request (too
// big for glibc's per-thread cache) cost more than the request's other
// allocations together. A connection's read buffer comes from one too
// (through Allocator, under a Beast flat_buffer), so that giving it back
// while the connection waits and taking it again for the next request costs
// no malloc. Worker-thread only: no lock.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace geogate::common {

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
    /// Gives the buffer back while it is not needed (data() is then null)...
    void Return() {
      if (buf_) pool_->Give(std::move(buf_));
    }
    /// ...and takes one again (the same or another: its bytes are not kept).
    void Retake() {
      if (!buf_) buf_ = pool_->TakeBuffer();
    }

   private:
    BufferPool* pool_;
    std::unique_ptr<char[]> buf_;
  };

  Lease Take() { return Lease(*this, TakeBuffer()); }
  size_t bytes() const { return bytes_; }
  size_t idle() const { return free_.size(); }

  /// An allocator that serves allocations of exactly bytes() from the pool
  /// and any other size from operator new: under a Beast flat_buffer, whose
  /// first prepare(n) on an empty buffer allocates n bytes and whose
  /// shrink_to_fit() of an empty one frees them, buffers of the pool's size
  /// are recycled and anything that grows past it is ordinary memory.
  template <class T>
  class Allocator {
   public:
    using value_type = T;
    explicit Allocator(BufferPool& pool) : pool_(&pool) {}
    template <class U>
    Allocator(const Allocator<U>& o) : pool_(o.pool()) {}  // NOLINT: rebinding is implicit

    T* allocate(size_t n) {
      if constexpr (sizeof(T) == 1) {
        if (n == pool_->bytes_) return reinterpret_cast<T*>(pool_->TakeBuffer().release());
      }
      return static_cast<T*>(::operator new(n * sizeof(T)));
    }
    void deallocate(T* p, size_t n) {
      if constexpr (sizeof(T) == 1) {
        if (n == pool_->bytes_)
          return pool_->Give(std::unique_ptr<char[]>(reinterpret_cast<char*>(p)));
      }
      ::operator delete(p);
    }
    BufferPool* pool() const { return pool_; }
    template <class U>
    bool operator==(const Allocator<U>& o) const {
      return pool_ == o.pool();
    }

   private:
    BufferPool* pool_;
  };

 private:
  std::unique_ptr<char[]> TakeBuffer() {
    if (free_.empty()) return std::make_unique_for_overwrite<char[]>(bytes_);
    std::unique_ptr<char[]> b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void Give(std::unique_ptr<char[]> b) {
    if (free_.size() < keep_) free_.push_back(std::move(b));
  }

  size_t bytes_;
  size_t keep_;
  std::vector<std::unique_ptr<char[]>> free_;
};

}  // namespace geogate::common
