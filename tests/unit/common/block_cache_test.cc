#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "common/block_cache.h"
#include "proxy/headers.h"

using namespace geogate::common;
using namespace geogate::proxy;
namespace http = boost::beast::http;

TEST_CASE("block cache: a freed block is the next one of its size class", "[block_cache]") {
  void* a = block_cache::Allocate(40);
  size_t cached = block_cache::CachedBlocks();
  block_cache::Deallocate(a, 40);
  CHECK(block_cache::CachedBlocks() == cached + 1);
  void* b = block_cache::Allocate(64);  // same class (up to 64 bytes)
  CHECK(b == a);
  CHECK(block_cache::CachedBlocks() == cached);
  void* c = block_cache::Allocate(65);  // the next class: another block
  CHECK(c != a);
  block_cache::Deallocate(b, 64);
  block_cache::Deallocate(c, 65);
}

TEST_CASE("block cache: a block is at most 63 bytes larger than asked", "[block_cache]") {
  // 416 and 448 bytes share the 448-byte class, where doubling classes
  // gave each a 512-byte block.
  void* a = block_cache::Allocate(416);
  block_cache::Deallocate(a, 416);
  void* b = block_cache::Allocate(448);
  CHECK(b == a);
  void* c = block_cache::Allocate(449);  // the 512-byte class
  CHECK(c != a);
  block_cache::Deallocate(b, 448);
  block_cache::Deallocate(c, 449);
  // Every class is a multiple of 64 bytes up to kLargestBlock.
  CHECK(block_cache::MaxCached(1) == block_cache::kMaxCachedBytes / 64);
  CHECK(block_cache::MaxCached(600) == block_cache::kMaxCachedBytes / 640);
  CHECK(block_cache::MaxCached(block_cache::kLargestBlock) ==
        block_cache::kMaxCachedBytes / block_cache::kLargestBlock);
  CHECK(block_cache::MaxCached(block_cache::kLargestBlock + 1) == 0);
}

TEST_CASE("block cache: large blocks are not kept", "[block_cache]") {
  size_t cached = block_cache::CachedBlocks();
  void* big = block_cache::Allocate(4096);
  block_cache::Deallocate(big, 4096);
  CHECK(block_cache::CachedBlocks() == cached);
}

TEST_CASE("block cache: a thread keeps at most kMaxCachedBytes per class", "[block_cache]") {
  std::thread([] {
    // 200 bytes are served from the 256-byte class.
    CHECK(block_cache::MaxCached(200) == block_cache::kMaxCachedBytes / 256);
    CHECK(block_cache::MaxCached(64) == block_cache::kMaxCachedBytes / 64);
    CHECK(block_cache::MaxCached(4096) == 0);
    std::vector<void*> blocks;
    for (size_t i = 0; i < block_cache::MaxCached(200) + 10; ++i)
      blocks.push_back(block_cache::Allocate(200));
    for (void* p : blocks)
      block_cache::Deallocate(p, 200);
    CHECK(block_cache::CachedBlocks() == block_cache::MaxCached(200));
    CHECK(block_cache::CachedBlocks() * 256 <= block_cache::kMaxCachedBytes);
  }).join();  // the thread's blocks are freed when it ends (LeakSanitizer checks)
}

TEST_CASE("block cache: a block freed on another thread joins that thread's list",
          "[block_cache]") {
  void* p = block_cache::Allocate(100);
  std::thread([p] {
    block_cache::Deallocate(p, 100);
    CHECK(block_cache::CachedBlocks() == 1);
  }).join();
}

TEST_CASE("block cache: Beast fields on pooled blocks parse and keep a request head",
          "[block_cache]") {
  http::request_parser<http::string_body, PooledAllocator<char>> parser;
  std::string raw =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
      "X-Long: " +
      std::string(700, 'x') + "\r\nContent-Length: 2\r\n\r\n{}";
  boost::system::error_code ec;
  size_t used = 0;
  while (!ec && !parser.is_done() && used < raw.size())
    used += parser.put(boost::asio::buffer(raw.data() + used, raw.size() - used), ec);
  REQUIRE_FALSE(ec);
  REQUIRE(parser.is_done());
  http::request<http::string_body, Fields> req = parser.release();
  CHECK(req[http::field::host] == "gw");
  CHECK(req["X-Long"].size() == 700);  // larger than any size class
  req.erase(http::field::host);
  req.set("X-Added", "1");
  Fields copy = req.base();
  CHECK(copy["X-Added"] == "1");
  CHECK(copy.count(http::field::host) == 0);
  CHECK(req.body() == "{}");
}
