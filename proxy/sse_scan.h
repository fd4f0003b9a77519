// The byte scans of SseObserver, apart so they can be checked against the
// plain searches they replace: per relayed token they were most of the
// gateway's user-space work (callgrind, 64-token streams: finding the end
// of an event byte by byte 22 %, and four std::string_view::find calls on
// the event's JSON, each a memchr per quote, 37 %).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace geogate::proxy {

/// The end of the next SSE event in `buf` from `pos`: the index just past
/// its blank line ("\n\n" or "\n\r\n"), or npos.
size_t SseEventEnd(std::string_view buf, size_t pos);
/// The same, and `line_end`: the index of the event's first '\n' (when the
/// event is one line, where that line ends; npos when no end is found).
size_t SseEventEnd(std::string_view buf, size_t pos, size_t& line_end);

/// What OnEvent looks for in an event's data, found in one pass over its
/// quotes. A key counts when its quoted text occurs in `data` (as
/// std::string_view::find would find it) and is not followed by a null
/// value (":null", JSON whitespace allowed around the colon): there is
/// nothing to read from a null member. OpenAI puts "usage":null in every
/// chunk of a stream that asked for usage (a JSON parse per token cost ten
/// times the rest of the event's scanning), and "content":null beside a
/// tool call or reasoning. empty_choices is looked for only when `usage`
/// is set (false otherwise).
struct SseEventKeys {
  bool usage = false;  // "usage"
  // Generated tokens, as in the Responses API's delta events: "content",
  // "text" (completions), "reasoning_content" or "reasoning" (reasoning
  // models through vLLM, DeepSeek), "refusal", "arguments" (tool calls).
  bool content = false;
  bool empty_choices = false;  // "choices":[] (only when usage)
};
SseEventKeys FindSseEventKeys(std::string_view data);

/// FindSseEventKeys over the events of one stream, one after another, with
/// the same answers. A stream's chunks start alike (id, object, created,
/// model, up to the delta: about 125 of a 177-byte chat chunk), so the
/// bytes before the first place a key could start in the previous event
/// are compared with that event's (one memcmp) instead of scanned: equal
/// bytes hold no key either. Holds up to kPrefixBytes of one event.
class SseKeyScanner {
 public:
  static constexpr size_t kPrefixBytes = 192;
  SseEventKeys Find(std::string_view data);

 private:
  // The start of the last event scanned, up to where a key could start in
  // it (a quote and the first two letters of a key): no key starts at any
  // p with p + 2 < prefix_size_ in these bytes.
  std::array<char, kPrefixBytes> prefix_{};
  uint8_t prefix_size_ = 0;
  static_assert(kPrefixBytes <= UINT8_MAX, "prefix_size_ counts it");
};

}  // namespace geogate::proxy
