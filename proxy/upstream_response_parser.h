// A backend's response, parsed by Beast's HTTP/1 parser (http::basic_parser)
// into what the proxy needs of it and nothing more: the status, whether the
// body is an event stream, and the fields the client gets, already
// serialised as they are written to the client's head. The body goes
// straight into a buffer the caller names, as Beast's buffer_body.
//
// Beast's own response_parser keeps every field in a fields container (a
// node allocation and a tree insert each); the proxy then looked two of
// them up, copied the rest into the client's head one by one, and cleared
// the container. Here each field is judged and, when forwarded, appended
// once, as Beast parses it. bench/RESULTS.md, "The backend's head written
// once", has the A/B.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/field.hpp>

#include "common/block_cache.h"

namespace geogate::proxy {

class UpstreamResponseParser : public boost::beast::http::basic_parser<false> {
 public:
  /// A parser for one response: no body limit (a stream runs as long as
  /// the backend generates), a 64 KiB head limit.
  UpstreamResponseParser();

  /// The status code and reason phrase, once the status line is parsed.
  unsigned status() const { return status_; }
  std::string_view reason() const { return reason_; }
  /// The (first) Content-Type is text/event-stream.
  bool event_stream() const { return event_stream_; }
  /// The body has a content coding (a Content-Encoding other than
  /// identity): its bytes cannot be read as JSON or events.
  bool encoded() const { return encoded_; }
  /// The backend's fields for the client, "Name: value\r\n" each, in the
  /// backend's order and spelling: all but those ForwardsResponseField
  /// (headers.h) refuses and those the response's Connection fields name.
  /// Complete once is_header_done().
  std::string_view forwarded_fields() const { return fields_; }
  /// Frees the forwarded fields' block once they are copied (a stream holds
  /// its parser for minutes); forwarded_fields() is then empty.
  void ReleaseFields();

  /// Where the next body bytes go: `size` bytes at `data`. When they are
  /// full, or `data` is null, put() stops with http::error::need_buffer.
  void set_body_buffer(char* data, size_t size) {
    body_data_ = data;
    body_room_ = size;
  }
  /// What is left of the buffer set_body_buffer named.
  size_t body_room() const { return body_room_; }

 private:
  using ErrorCode = boost::system::error_code;
  using StringView = boost::beast::string_view;

  void on_request_impl(boost::beast::http::verb, StringView, StringView, int, ErrorCode&) override {
  }
  void on_response_impl(int code, StringView reason, int version, ErrorCode& ec) override;
  void on_field_impl(boost::beast::http::field name, StringView name_string, StringView value,
                     ErrorCode& ec) override;
  void on_header_impl(ErrorCode& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         ErrorCode& ec) override;
  size_t on_body_impl(StringView body, ErrorCode& ec) override;
  void on_chunk_header_impl(std::uint64_t size, StringView extensions, ErrorCode& ec) override;
  size_t on_chunk_body_impl(std::uint64_t remain, StringView body, ErrorCode& ec) override;
  void on_finish_impl(ErrorCode& ec) override;

  /// Drops the fields a Connection field named (connection_), wherever in
  /// the head they came.
  void DropConnectionNamed();

  common::PooledString fields_;
  // The tokens of the Connection fields beyond close and keep-alive (which
  // are hop-by-hop anyway): rare, so a plain string, empty and unallocated
  // for nearly every response.
  std::string connection_;
  std::string reason_;  // "OK" and its kind fit in the string itself
  char* body_data_ = nullptr;
  size_t body_room_ = 0;
  unsigned status_ = 0;
  bool content_type_seen_ = false;
  bool event_stream_ = false;
  bool encoded_ = false;
};

}  // namespace geogate::proxy
