// When to hand freed heap memory back to the operating system. glibc keeps
// what a burst of connections freed (1000 half-open TLS handshakes: ~90 MB)
// in its arenas, where RSS never shows it leaving: in use after the burst
// was back to 2 MB, free-but-held was 125 MB, and malloc_trim(0) returned
// it. The server asks this policy once per tick and trims when connections
// fell far below their peak.
#pragma once

#include <chrono>
#include <cstdint>

namespace geogate::server {

class HeapTrimPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  /// A fall of at least this many connections from the peak...
  static constexpr int64_t kMinDrop = 256;
  /// ...to at most half of it, no more often than this.
  static constexpr std::chrono::seconds kMinInterval{10};

  /// @return true when the caller should trim now (and it then counts as done).
  bool Observe(int64_t open_connections, Clock::time_point now);

 private:
  int64_t peak_ = 0;
  Clock::time_point last_trim_{};
  bool trimmed_ = false;
};

/// Returns free heap memory to the OS (malloc_trim on glibc; else nothing).
void TrimHeap();

}  // namespace geogate::server
