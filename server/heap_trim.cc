#include "server/heap_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace geogate::server {

bool HeapTrimPolicy::Observe(int64_t open_connections, Clock::time_point now) {
  if (open_connections > peak_) peak_ = open_connections;
  if (peak_ - open_connections < kMinDrop || open_connections * 2 > peak_) return false;
  if (trimmed_ && now - last_trim_ < kMinInterval) return false;
  trimmed_ = true;
  last_trim_ = now;
  peak_ = open_connections;  // the next trim needs a new burst
  return true;
}

void TrimHeap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace geogate::server
