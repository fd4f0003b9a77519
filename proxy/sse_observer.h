// Watches a response body on its way to the client, without delaying it:
// - reads the `usage` object (prompt/completion tokens) when the backend
//   sends one, else counts SSE content events as an estimate;
// - records the gaps between content events (inter-token latency);
// - removes the usage-only chunk the gateway asked the backend for (it adds
//   stream_options.include_usage upstream for accounting) when the client did
//   not ask for it, so the client sees exactly the stream it requested.
// Bytes are forwarded as they arrive; only while stripping, the unfinished
// tail of an event is held until its end arrives.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/block_cache.h"

namespace geogate::gateway {

class SseObserver {
 public:
  using Clock = std::chrono::steady_clock;

  /// @param sse the response is text/event-stream.
  /// @param client_wants_usage the client itself asked for the usage chunk.
  SseObserver(bool sse, bool client_wants_usage)
      : sse_(sse), strip_usage_(sse && !client_wants_usage) {}

  /// @return the bytes to send to the client now (a view into `data` or into
  ///         the observer's own buffer, valid until the next call).
  std::string_view Filter(std::string_view data, Clock::time_point now);
  /// End of body (at `now`): whatever was held back, and final accounting.
  std::string_view Finish(Clock::time_point now);

  int64_t prompt_tokens() const { return prompt_tokens_; }
  /// From usage when reported, else the number of content events.
  int64_t completion_tokens() const { return usage_seen_ ? completion_tokens_ : content_events_; }
  bool estimated() const { return !usage_seen_; }
  bool usage_seen() const { return usage_seen_; }
  int64_t content_events() const { return content_events_; }
  /// Seconds between consecutive content events.
  std::span<const double> token_gaps() const { return gaps_; }

 private:
  /// Inspects one complete event; @return false to drop it.
  bool OnEvent(std::string_view event, Clock::time_point now);
  void ParseUsage(std::string_view json);
  /// Inspects the complete events in `buf`; @return the bytes they span.
  size_t ScanEvents(std::string_view buf, Clock::time_point now);

  static constexpr size_t kMaxHeldBytes = 1 << 20;
  static constexpr size_t kMaxJsonBody = 4 << 20;

  bool sse_;
  bool strip_usage_;
  // From the block cache like json_body_: a new observer per response, and
  // std::string's growth from empty cost several mallocs per stream.
  PooledString tail_;  // unfinished event (copy), for scanning and, when stripping, sending
  PooledString out_;
  // Non-SSE bodies, for the usage object at the end; from the block cache,
  // since every non-streamed answer fills one (up to 511 bytes stay there).
  PooledString json_body_;
  bool json_overflow_ = false;
  bool usage_seen_ = false;
  int64_t prompt_tokens_ = -1;
  int64_t completion_tokens_ = 0;
  int64_t content_events_ = 0;
  Clock::time_point last_event_{};
  std::vector<double, PooledAllocator<double>> gaps_;  // 64 fit one cached block
};

}  // namespace geogate::gateway
