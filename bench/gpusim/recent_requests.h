// The heads of the last requests the simulator received (method, target
// and every header, in order), for tests that must see what a proxy
// forwarded: `--record-requests N` keeps N, `GET /control/requests` reads
// them. Off by default, so benchmarks pay nothing for it.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json/array.hpp>

namespace gpusim {

/// Thread-safe: workers add, the control listener reads.
class RecentRequests {
 public:
  struct Head {
    std::string method;
    std::string target;
    std::vector<std::pair<std::string, std::string>> headers;  // as received
  };

  explicit RecentRequests(size_t capacity) : capacity_(capacity) {}

  bool enabled() const { return capacity_ > 0; }
  /// Keeps `head`, dropping the oldest beyond the capacity.
  void add(Head head);
  /// Oldest first: [{"method","target","headers":[[name,value],...]}].
  boost::json::array snapshot() const;
  void clear();

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<Head> heads_;
};

}  // namespace gpusim
