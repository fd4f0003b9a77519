// The response head the gateway sends for a proxied response, serialised
// as it is built so it can leave in the same write as the first body bytes
// (one syscall, one TCP segment for small first tokens), with no Beast
// fields container in between.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/field.hpp>

#include "common/block_cache.h"

namespace geogate::proxy {

namespace http = boost::beast::http;

class ResponseHead {
 public:
  /// Writes the status line. `reason` empty: the standard reason phrase.
  ResponseHead(unsigned status, std::string_view reason, unsigned version);

  /// Adds a field. The framing fields (Content-Length, Transfer-Encoding,
  /// Connection) are SetFraming's: callers do not add them.
  void insert(std::string_view name, std::string_view value);
  void set(std::string_view name, std::string_view value) { insert(name, value); }
  void set(http::field f, std::string_view value) { insert(http::to_string(f), value); }
  /// Adds fields already serialised, "Name: value\r\n" each (a backend's,
  /// as UpstreamResponseParser forwards them).
  void AppendFields(std::string_view lines) { text_.append(lines); }

  /// Content-Length when `length` is known, else chunked when `chunked`,
  /// else close-delimited; Connection as `keep_alive` demands for the
  /// client's HTTP version. Ends the head: call it last, once.
  void SetFraming(std::optional<uint64_t> length, bool chunked, bool keep_alive);
  /// The serialised head, ending with the blank line.
  std::string_view text() const { return text_; }
  /// Frees the text once it is written (text() is then empty).
  void Release() {
    text_.clear();
    text_.shrink_to_fit();
  }

 private:
  unsigned version_;
  common::PooledString text_;  // a cached 512-byte block, not a malloc per response
};

}  // namespace geogate::proxy
