#include "proxy/sse_observer.h"

namespace geogate::proxy {

namespace {

// The payload of the event's data lines (joined with '\n' per the SSE spec).
std::string_view DataOf(std::string_view event, std::string& scratch);

// DataOf for an event of one line, whose '\n' is at `line_end` (the
// blank line after it: "\n" or "\r\n"), without scanning it again.
// @return false when the event is not one line.
bool SingleLineDataOf(std::string_view event, size_t line_end, std::string_view& data) {
  if (line_end == std::string_view::npos) return false;
  size_t blank = event.size() - line_end;  // "\n\n" or "\n\r\n"
  if (blank != 2 && !(blank == 3 && event[line_end + 1] == '\r')) return false;
  std::string_view line = event.substr(0, line_end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!line.starts_with("data:")) {
    data = {};
    return true;
  }
  line.remove_prefix(5);
  if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  data = line;
  return true;
}

std::string_view DataOf(std::string_view event, std::string& scratch) {
  scratch.clear();
  size_t lines = 0;
  std::string_view single;
  while (!event.empty()) {
    size_t nl = event.find('\n');
    std::string_view line = event.substr(0, nl);
    event.remove_prefix(nl == std::string_view::npos ? event.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.starts_with("data:")) continue;
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (lines == 0) {
      single = line;
    } else {
      if (lines == 1) scratch.assign(single);
      scratch += '\n';
      scratch += line;
    }
    ++lines;
  }
  return lines > 1 ? std::string_view(scratch) : single;
}

// paths[0] the prompt count, paths[1] the completion count, paths[2] the
// usage member (a repeated one replaces the earlier).
constexpr JsonMemberPath kChatUsage[] = {
    {"usage", "prompt_tokens"}, {"usage", "completion_tokens"}, {"", "usage"}};
// A non-streamed answer's usage object itself (found from the end of the
// answer, LastTopLevelMember): its two counts.
constexpr JsonMemberPath kChatUsageObject[] = {{"", "prompt_tokens"}, {"", "completion_tokens"}};
constexpr JsonMemberPath kResponsesUsageObject[] = {{"", "input_tokens"}, {"", "output_tokens"}};
// In a stream, usage is in the Response object of the final event.
constexpr JsonMemberPath kResponsesEventUsage[] = {{"usage", "input_tokens", "response"},
                                                   {"usage", "output_tokens", "response"},
                                                   {"response", "usage"}};

// The value of the event's `event:` field, or empty.
std::string_view EventNameOf(std::string_view event) {
  while (!event.empty()) {
    size_t nl = event.find('\n');
    std::string_view line = event.substr(0, nl);
    event.remove_prefix(nl == std::string_view::npos ? event.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.starts_with("event:")) continue;
    line.remove_prefix(6);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    return line;
  }
  return {};
}

// The Responses API events that end a response; each carries the Response
// object with its usage.
bool IsFinalResponsesEvent(std::string_view type) {
  return type == "response.completed" || type == "response.incomplete" || type == "response.failed";
}

}  // namespace

void SseObserver::ParseUsage(std::string_view text, std::span<const JsonMemberPath> paths) {
  // Only the two counts are read, with no document of the answer built; an
  // invalid text counts nothing.
  int64_t found[2] = {-1, -1};
  boost::system::error_code ec;
  JsonTopLevel top = ReadJsonMembers(
      text, paths,
      [&](size_t i, const JsonMemberValue& v) {
        if (i == 2) {  // paths[2], when given: a repeated usage member replaces the earlier one
          found[0] = found[1] = -1;
          return;
        }
        if (v.kind == JsonMemberValue::Kind::kInt64)
          found[i] = v.int64;
        else if (v.kind == JsonMemberValue::Kind::kUint64)
          found[i] = static_cast<int64_t>(v.uint64);
        else
          found[i] = -1;
      },
      ec);
  if (top != JsonTopLevel::kObject) return;
  int64_t p = found[0], c = found[1];
  if (p >= 0) prompt_tokens_ = p;
  if (c >= 0) completion_tokens_ = c;
  usage_seen_ = usage_seen_ || p >= 0 || c >= 0;
}

void SseObserver::CountContent(Clock::time_point now) {
  ++content_events_;
  if (last_event_ != Clock::time_point{}) {
    if (gap_count_ == gaps_.size()) FlushGaps();
    gaps_[gap_count_++] = std::chrono::duration<double>(now - last_event_).count();
  } else {
    first_event_ = now;
  }
  last_event_ = now;
}

void SseObserver::FlushGaps() {
  if (gap_count_ != 0 && gap_sink_) gap_sink_(token_gaps());
  gap_count_ = 0;
}

void SseObserver::OnResponsesEvent(std::string_view event, std::string_view data,
                                   Clock::time_point now) {
  // The type is in the `event:` field (OpenAI sends it on every event) and
  // in the data's "type"; the data is read only when the field is absent.
  std::string_view type = EventNameOf(event);
  std::string type_storage;
  if (type.empty()) {
    static constexpr JsonMemberPath kType[] = {{"", "type"}};
    boost::system::error_code ec;
    JsonTopLevel top = ReadJsonMembers(
        data, kType,
        [&](size_t, const JsonMemberValue& v) {
          if (v.kind == JsonMemberValue::Kind::kString) type_storage.assign(v.text);
        },
        ec);
    if (top != JsonTopLevel::kObject) return;
    type = type_storage;
  }
  if (type.starts_with("response.") && type.ends_with(".delta"))
    CountContent(now);
  else if (IsFinalResponsesEvent(type))
    ParseUsage(data, kResponsesEventUsage);
}

bool SseObserver::OnEvent(std::string_view event, Clock::time_point now, size_t line_end) {
  std::string scratch;
  std::string_view data;
  if (!SingleLineDataOf(event, line_end, data)) data = DataOf(event, scratch);
  if (data.empty() || data == "[DONE]") return true;
  if (api_ == Api::kResponses) {
    ++responses_events_;
    OnResponsesEvent(event, data, now);
    return true;
  }
  SseEventKeys keys = key_scanner_.Find(data);
  bool usage_only = false;
  if (keys.usage) {
    bool before = usage_seen_;
    ParseUsage(data, kChatUsage);
    // The usage-only chunk has an empty choices array.
    usage_only = usage_seen_ && !before && keys.empty_choices;
  }
  if (!usage_only && keys.content) CountContent(now);
  return !(usage_only && strip_usage_);
}

size_t SseObserver::ScanEvents(std::string_view buf, Clock::time_point now) {
  size_t pos = 0;
  for (;;) {
    size_t line_end;
    size_t end = SseEventEnd(buf, pos, line_end);
    if (end == std::string_view::npos) return pos;
    if (tail_lost_) {
      // The rest of the event that went out unheld: it is not an event of
      // its own. The whole of it is a Responses event when it had data.
      tail_lost_ = false;
      if (api_ == Api::kResponses && lost_had_data_) ++responses_events_;
    } else {
      OnEvent(buf.substr(pos, end - pos), now, line_end - pos);
    }
    pos = end;
  }
}

void SseObserver::LoseEvent(std::string_view start) {
  if (tail_lost_) return;  // more of the event lost before: `start` is its middle
  tail_lost_ = true;
  lost_had_data_ = start.starts_with("data") || start.find("\ndata") != std::string_view::npos;
}

void SseObserver::KeepForUsage(std::string_view data) {
  if (json_start_ == JsonStart::kUnknown) {
    size_t first = data.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos)
      json_start_ = data[first] == '{' ? JsonStart::kObject : JsonStart::kOther;
  }
  if (json_start_ == JsonStart::kOther) return;  // not an object: it has no usage member
  if (data.size() >= kUsageTailBytes) {
    json_body_.assign(data.substr(data.size() - kUsageTailBytes));
    json_cut_ = true;
    return;
  }
  // Cut to one tail when two would be passed: a byte is moved at most
  // once on its way through, and at most two tails are held.
  if (json_body_.size() + data.size() > 2 * kUsageTailBytes) {
    json_body_.erase(0, json_body_.size() + data.size() - kUsageTailBytes);
    json_cut_ = true;
  }
  json_body_.append(data);
}

std::string_view SseObserver::Filter(std::string_view data, Clock::time_point now) {
  if (encoded_) return data;
  if (!sse_) {
    KeepForUsage(data);
    return data;
  }
  if (!holding_) {
    // Gave up holding (an unfinished event over kMaxHeldBytes: not SSE
    // after all): send `data` untouched; scan a copy of any unfinished
    // event joined with the new bytes. A lost event's end, when it comes,
    // is the first one ScanEvents finds.
    if (tail_.empty()) {
      size_t done = ScanEvents(data, now);
      if (done < data.size()) {
        if (data.size() - done <= kMaxHeldBytes)
          tail_.assign(data.substr(done));
        else
          LoseEvent(data.substr(done));
      }
    } else {
      tail_.append(data);
      size_t done = ScanEvents(tail_, now);
      tail_.erase(0, done);
      if (tail_.size() > kMaxHeldBytes) {
        LoseEvent(tail_);
        tail_.clear();
      }
    }
    return data;
  }
  // Complete events go out (minus the usage-only one when stripping); an
  // unfinished event waits for its end. Until an event is dropped (once per
  // stream) what goes out is a prefix of the bytes scanned, sent from where
  // they are; only then are the kept events copied.
  std::string_view buf = data;
  if (!tail_.empty()) {
    tail_.append(data);
    buf = tail_;
  }
  bool copying = false;
  size_t done = 0;
  for (;;) {
    size_t line_end;
    size_t end = SseEventEnd(buf, done, line_end);
    if (end == std::string_view::npos) break;
    std::string_view event = buf.substr(done, end - done);
    bool keep = OnEvent(event, now, line_end - done);
    if (!keep && !copying) {
      out_.assign(buf.substr(0, done));
      copying = true;
    } else if (keep && copying) {
      out_.append(event);
    }
    done = end;
  }
  std::string_view result = copying ? std::string_view(out_) : buf.substr(0, done);
  if (buf.data() == tail_.data()) {
    if (!copying) {  // tail_ changes below: keep what goes out
      out_.assign(result);
      result = out_;
    }
    tail_.erase(0, done);
  } else {
    tail_.assign(buf.substr(done));
  }
  if (tail_.size() > kMaxHeldBytes) {  // not SSE after all: stop holding
    if (result.data() != out_.data()) out_.assign(result);
    out_.append(tail_);
    LoseEvent(tail_);  // the client has the start of an event that never ended
    tail_.clear();
    holding_ = false;
    result = out_;
  }
  return result;
}

std::string_view SseObserver::Finish(Clock::time_point now) {
  if (encoded_) return {};
  if (!sse_) {
    // The usage member comes after the choices: only it is parsed, found
    // from the end of the answer (a whole parse of the answer was a tenth
    // of a small request's instructions). An answer cut short, or whose
    // usage is not an object, counts nothing.
    std::optional<std::string_view> usage;
    if (json_start_ == JsonStart::kObject)
      usage = json_cut_ ? LastTopLevelMemberOfTail(json_body_, "usage")
                        : LastTopLevelMember(json_body_, "usage");
    if (usage)
      ParseUsage(*usage, api_ == Api::kResponses
                             ? std::span<const JsonMemberPath>(kResponsesUsageObject)
                             : std::span<const JsonMemberPath>(kChatUsageObject));
    json_body_.clear();
    return {};
  }
  // Returned from tail_, so what the last Filter returned (a view of out_,
  // perhaps) stays valid: the relay writes both at once.
  if (holding_ && !tail_.empty()) {
    // A final event without its blank line still counts (and may be the
    // usage-only chunk to drop).
    if (!OnEvent(tail_, now)) tail_.clear();
    return tail_;
  }
  tail_.clear();
  return {};
}

}  // namespace geogate::proxy
