#include <catch2/catch.hpp>

#include <vector>

#include "common/buffer_pool.h"

using geogate::common::BufferPool;

TEST_CASE("buffer pool: a returned buffer is the next one taken", "[buffer_pool]") {
  BufferPool pool(64, 4);
  char* first = nullptr;
  {
    BufferPool::Lease a = pool.Take();
    first = a.data();
    CHECK(a.size() == 64);
    CHECK(pool.idle() == 0);
  }
  CHECK(pool.idle() == 1);
  BufferPool::Lease b = pool.Take();
  CHECK(b.data() == first);
  CHECK(pool.idle() == 0);
  b.Return();
  CHECK(b.data() == nullptr);
  CHECK(pool.idle() == 1);
  b.Retake();
  CHECK(b.data() == first);
}

TEST_CASE("buffer pool: at most `keep` idle buffers stay", "[buffer_pool]") {
  BufferPool pool(64, 2);
  {
    std::vector<BufferPool::Lease> held;
    for (int i = 0; i < 5; ++i)
      held.push_back(pool.Take());
  }
  CHECK(pool.idle() == 2);
}

TEST_CASE("buffer pool: the allocator recycles buffers of the pool's size only", "[buffer_pool]") {
  BufferPool pool(256, 4);
  BufferPool::Allocator<char> alloc(pool);
  char* p = alloc.allocate(256);
  alloc.deallocate(p, 256);
  CHECK(pool.idle() == 1);
  char* q = alloc.allocate(100);
  alloc.deallocate(q, 100);
  CHECK(pool.idle() == 1);
  char* r = alloc.allocate(256);  // the pooled buffer again
  CHECK(r == p);
  CHECK(pool.idle() == 0);
  alloc.deallocate(r, 256);
  CHECK(pool.idle() == 1);
}
