// Fuzzes what a backend sends: its response through UpstreamResponseParser,
// the body through SseObserver as an event stream and as a JSON answer, and
// the usage scan of a JSON answer's tails. The first input byte picks where
// the bytes are split and how much body buffer each put gets; the rest is
// the response. Checks, besides the sanitizers:
//  - the same bytes split in two parse to the same status, forwarded
//    fields and body as in one piece;
//  - every forwarded line is "name: value\r\n" with a name the forwarding
//    rule accepts;
//  - an event stream the client asked the usage chunk of reaches it byte
//    for byte;
//  - a tail of an answer that begins as an object finds its usage member or
//    nothing, never another value.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "proxy/headers.h"
#include "proxy/json_members.h"
#include "proxy/sse_observer.h"
#include "proxy/upstream_response_parser.h"
#include "tests/fuzz/fuzz_check.h"

namespace http = boost::beast::http;
using geogate::proxy::ForwardsResponseField;
using geogate::proxy::LastTopLevelMember;
using geogate::proxy::LastTopLevelMemberOfTail;
using geogate::proxy::SseObserver;
using geogate::proxy::UpstreamResponseParser;

using geogate::fuzz::Check;

namespace {

struct Parsed {
  bool failed = false;
  bool done = false;
  unsigned status = 0;
  bool event_stream = false;
  std::string fields;
  std::string body;
};

// Parses `wire` given in two reads (the first `split` bytes, then the
// rest), with `room` bytes of body buffer per put; then the end of input.
Parsed Parse(std::string_view wire, size_t split, size_t room) {
  UpstreamResponseParser p;
  Parsed out;
  std::string pending;
  std::string buf(room, '\0');
  boost::system::error_code ec;
  for (std::string_view read : {wire.substr(0, split), wire.substr(split)}) {
    pending.append(read);
    while (!p.is_done() && !pending.empty()) {
      p.set_body_buffer(buf.data(), buf.size());
      size_t used = p.put(boost::asio::buffer(pending), ec);
      pending.erase(0, used);
      out.body.append(buf.data(), buf.size() - p.body_room());
      if (ec == http::error::need_buffer) {
        ec = {};
        continue;
      }
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec) {
        out.failed = true;
        return out;
      }
      if (used == 0) break;
    }
  }
  if (!p.is_done() && p.is_header_done()) {
    p.put_eof(ec);  // a close-delimited body ends here; any other is cut
    if (ec) out.failed = true;
  }
  out.done = p.is_done();
  out.status = p.status();
  out.event_stream = p.event_stream();
  if (p.is_header_done()) out.fields = p.forwarded_fields();
  return out;
}

void CheckForwardedLines(std::string_view fields) {
  while (!fields.empty()) {
    size_t end = fields.find("\r\n");
    Check(end != std::string_view::npos);
    std::string_view line = fields.substr(0, end);
    fields.remove_prefix(end + 2);
    size_t colon = line.find(": ");
    Check(colon != std::string_view::npos && colon > 0);
    std::string_view name = line.substr(0, colon);
    Check(name.find_first_of(" \t:\r\n") == std::string_view::npos);
    Check(line.substr(colon + 2).find_first_of("\r\n") == std::string_view::npos);
    Check(ForwardsResponseField(http::string_to_field(name), name));
  }
}

void CheckUsageTails(std::string_view body) {
  size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || body[first] != '{') return;
  std::optional<std::string_view> whole = LastTopLevelMember(body, "usage");
  for (size_t cut = 0; cut < body.size(); ++cut) {
    std::optional<std::string_view> tail = LastTopLevelMemberOfTail(body.substr(cut), "usage");
    Check(!tail || (whole && *tail == *whole));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 64 * 1024) return 0;
  const uint8_t mode = data[0];
  std::string_view wire(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t split = wire.empty() ? 0 : (mode * 7919u) % (wire.size() + 1);
  const size_t room = 1 + (mode & 0x0f) * 37;

  Parsed one = Parse(wire, wire.size(), 4096);
  Parsed two = Parse(wire, split, room);
  if (!one.failed && !two.failed && one.done && two.done) {
    Check(one.status == two.status);
    Check(one.event_stream == two.event_stream);
    Check(one.fields == two.fields);
    Check(one.body == two.body);
  }
  CheckForwardedLines(one.fields);
  CheckForwardedLines(two.fields);

  // The body as the relay hands it on, in the split parse's pieces.
  SseObserver::Clock::time_point t{};
  SseObserver pass(true, /*client_wants_usage=*/true);
  SseObserver strip(true, /*client_wants_usage=*/false,
                    (mode & 0x10) ? SseObserver::Api::kResponses : SseObserver::Api::kChat);
  SseObserver json(false, false);
  std::string relayed;
  std::string_view body = one.body;
  for (size_t at = 0; at < body.size(); at += room) {
    std::string_view piece = body.substr(at, room);
    t += std::chrono::milliseconds(1);
    relayed.append(pass.Filter(piece, t));
    strip.Filter(piece, t);
    json.Filter(piece, t);
  }
  relayed.append(pass.Finish(t));
  strip.Finish(t);
  json.Finish(t);
  Check(relayed == body);
  if (body.size() <= 4096) CheckUsageTails(body);
  return 0;
}
