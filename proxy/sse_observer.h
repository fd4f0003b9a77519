// Watches a response body on its way to the client, without delaying it:
// - reads the `usage` object (prompt/completion tokens) when the backend
//   sends one, else counts SSE content events as an estimate;
// - records when the first content event came (the Responses API's time to
//   first token: its stream opens with events that carry no token) and the
//   gaps between content events (inter-token latency);
// - removes the usage-only chunk the gateway asked the backend for (it adds
//   stream_options.include_usage upstream for accounting) when the client did
//   not ask for it, so the client sees exactly the stream it requested.
// Whole events are forwarded as they arrive; the unfinished tail of an
// event is held until its end arrives. An SSE client acts on an event only
// at its end, so holding the tail delays nothing it sees, and a stream the
// backend cuts mid-event still ends on an event boundary, where the
// gateway's error event can follow (glued to half an event, a client would
// read one event of broken JSON and lose the error). A tail over 1 MiB is
// not SSE after all: the observer then stops holding (at_event_end()
// tells).
//
// Two dialects (Api):
// - chat (chat completions, completions, embeddings): usage.prompt_tokens
//   and usage.completion_tokens, content events are the data events with a
//   generated-token member that is not null (SseEventKeys::content:
//   content, text, reasoning_content, reasoning, refusal, arguments);
// - the Responses API (/v1/responses): usage.input_tokens and
//   usage.output_tokens, in a stream inside response.completed (or
//   .incomplete / .failed); content events are the `response.*.delta`
//   events (output_text, refusal, function-call arguments, reasoning text).
//   Responses streams always report usage, so nothing is ever stripped.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "common/block_cache.h"
#include "proxy/json_members.h"
#include "proxy/sse_scan.h"

namespace geogate::proxy {

class SseObserver {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Api { kChat, kResponses };

  /// @param sse the response is text/event-stream.
  /// @param client_wants_usage the client itself asked for the usage chunk.
  /// @param api whose shapes the body has.
  SseObserver(bool sse, bool client_wants_usage, Api api = Api::kChat)
      : sse_(sse),
        strip_usage_(sse && !client_wants_usage && api == Api::kChat),
        holding_(sse),
        api_(api) {}

  /// The body has a content coding (a backend that encoded it although the
  /// gateway asked for identity): nothing in it can be read. It passes as
  /// it comes; nothing is held, removed or counted (the tokens are an
  /// estimate of 0), and no event may follow it (at_event_end() is false).
  void set_encoded() {
    encoded_ = true;
    sse_ = strip_usage_ = holding_ = false;
  }

  /// @return the bytes to send to the client now (a view into `data` or into
  ///         the observer's own buffer, valid until the next call).
  std::string_view Filter(std::string_view data, Clock::time_point now);
  /// End of body (at `now`): whatever was held back, and final accounting.
  /// The view the last Filter returned stays valid beside the one returned.
  std::string_view Finish(Clock::time_point now);

  int64_t prompt_tokens() const { return prompt_tokens_; }
  /// From usage when reported, else the number of content events.
  int64_t completion_tokens() const { return usage_seen_ ? completion_tokens_ : content_events_; }
  bool estimated() const { return !usage_seen_; }
  bool usage_seen() const { return usage_seen_; }
  int64_t content_events() const { return content_events_; }
  /// Responses API events seen with data: the `sequence_number` of the next
  /// one (OpenAI numbers a response's events from 0).
  int64_t responses_events() const { return responses_events_; }
  /// Whether what went to the client so far ends on an event boundary (an
  /// event may follow). False only after the observer stopped holding.
  bool at_event_end() const { return !encoded_ && (holding_ || (tail_.empty() && !tail_lost_)); }
  /// When the first content event was seen; Clock::time_point{} before.
  Clock::time_point first_content_at() const { return first_event_; }
  /// Seconds between consecutive content events are held in batches: when
  /// kGapBatch are held they go to the sink (set_gap_sink; without one they
  /// are dropped), the rest at FlushGaps. A stream's gaps so cost a fixed
  /// 128 bytes however long it runs, not 8 bytes a token.
  static constexpr size_t kGapBatch = 16;
  using GapSink = std::function<void(std::span<const double>)>;
  void set_gap_sink(GapSink sink) { gap_sink_ = std::move(sink); }
  /// A non-streamed answer's `usage` is looked for in its last
  /// kUsageTailBytes (it follows the answer's content: choices, embeddings,
  /// output); the observer holds between one and two of these per answer,
  /// never the whole of a large one.
  static constexpr size_t kUsageTailBytes = 1 << 20;
  /// The bytes the observer holds now: an unfinished event, or the tail of
  /// a non-streamed answer.
  size_t bytes_held() const { return tail_.size() + out_.size() + json_body_.size(); }
  /// Hands the gaps held to the sink; none are held after.
  void FlushGaps();
  /// The gaps held: those not yet handed to the sink.
  std::span<const double> token_gaps() const { return {gaps_.data(), gap_count_}; }

 private:
  /// Inspects one complete event; @return false to drop it. `line_end`:
  /// where its first line ends (its first '\n', from SseEventEnd), npos
  /// when not known.
  bool OnEvent(std::string_view event, Clock::time_point now,
               size_t line_end = std::string_view::npos);
  /// Reads usage from `json`: paths[0] the prompt count, paths[1] the
  /// completion count, paths[2] (if given) the usage member itself.
  void ParseUsage(std::string_view json, std::span<const JsonMemberPath> paths);
  /// A Responses API event: its type, then a delta or the final usage.
  void OnResponsesEvent(std::string_view event, std::string_view data, Clock::time_point now);
  void CountContent(Clock::time_point now);
  /// Inspects the complete events in `buf`; @return the bytes they span.
  /// Used once the observer stopped holding: the first event end after an
  /// event was lost ends that event.
  size_t ScanEvents(std::string_view buf, Clock::time_point now);
  /// An unfinished event, of which `start` is what is known, went to the
  /// client unheld: its rest is not inspected as an event of its own. When
  /// an event is lost already, `start` is more of it.
  void LoseEvent(std::string_view start);
  /// Keeps what a non-streamed answer's usage may be found in: the answer
  /// while it is small, its last kUsageTailBytes or more once it is not.
  void KeepForUsage(std::string_view data);

  static constexpr size_t kMaxHeldBytes = 1 << 20;

  bool sse_;
  bool strip_usage_;
  bool holding_;            // unfinished events wait for their end (until one is too big)
  bool encoded_ = false;    // set_encoded()
  bool tail_lost_ = false;  // not holding: the client got part of an event whose rest is unknown
  bool lost_had_data_ = false;  // that event's start had a data field
  Api api_;
  // From the block cache like json_body_: a new observer per response, and
  // std::string's growth from empty cost several mallocs per stream.
  common::PooledString tail_;  // unfinished event (copy), for scanning and sending
  common::PooledString out_;
  // Non-SSE bodies, for the usage object at the end; from the block cache,
  // since every non-streamed answer fills one (up to 511 bytes stay there).
  // Only a tail once the answer outgrows two kUsageTailBytes (json_cut_).
  common::PooledString json_body_;
  enum class JsonStart : uint8_t { kUnknown, kObject, kOther };
  JsonStart json_start_ = JsonStart::kUnknown;  // the answer's first non-space byte
  bool json_cut_ = false;                       // json_body_ lost the answer's start
  bool usage_seen_ = false;
  int64_t prompt_tokens_ = -1;
  int64_t completion_tokens_ = 0;
  int64_t content_events_ = 0;
  int64_t responses_events_ = 0;
  Clock::time_point first_event_{};
  Clock::time_point last_event_{};
  std::array<double, kGapBatch> gaps_;
  size_t gap_count_ = 0;
  SseKeyScanner key_scanner_;  // chat events' keys
  GapSink gap_sink_;
};

}  // namespace geogate::proxy
