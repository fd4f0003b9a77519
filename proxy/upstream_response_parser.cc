#include "proxy/upstream_response_parser.h"

#include <algorithm>
#include <cstring>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include "proxy/header_line.h"
#include "proxy/headers.h"

namespace geogate::proxy {

namespace beast = boost::beast;

namespace {

constexpr uint32_t kHeadLimit = 64 * 1024;

}  // namespace

UpstreamResponseParser::UpstreamResponseParser() {
  body_limit(boost::none);
  header_limit(kHeadLimit);
}

void UpstreamResponseParser::ReleaseFields() {
  fields_.clear();
  fields_.shrink_to_fit();
}

void UpstreamResponseParser::on_response_impl(int code, StringView reason, int /*version*/,
                                              ErrorCode& ec) {
  status_ = static_cast<unsigned>(code);
  reason_.assign(reason.data(), reason.size());
  ec = {};
}

void UpstreamResponseParser::on_field_impl(http::field name, StringView name_string,
                                           StringView value, ErrorCode& ec) {
  ec = {};
  if (is_header_done()) return;  // a chunked body's trailer: the head is gone
  std::string_view n(name_string.data(), name_string.size());
  std::string_view v(value.data(), value.size());
  if (name == http::field::connection) {
    for (auto token : http::token_list(value)) {
      if (beast::iequals(token, "close") || beast::iequals(token, "keep-alive")) continue;
      if (!connection_.empty()) connection_ += ',';
      connection_.append(token.data(), token.size());
    }
    return;
  }
  if (name == http::field::content_encoding) encoded_ = encoded_ || !ContentCodingOf(v).empty();
  if (name == http::field::content_type && !content_type_seen_) {
    content_type_seen_ = true;
    event_stream_ = v.starts_with("text/event-stream");
  }
  if (!ForwardsResponseField(name, n)) return;
  if (fields_.empty()) fields_.reserve(common::kPooledStringMax);
  AppendHeaderLine(fields_, n, v);
}

void UpstreamResponseParser::on_header_impl(ErrorCode& ec) {
  ec = {};
  if (!connection_.empty()) DropConnectionNamed();
}

void UpstreamResponseParser::DropConnectionNamed() {
  common::PooledString kept;
  std::string_view all = fields_;
  while (!all.empty()) {
    size_t end = all.find("\r\n") + 2;  // every line was written with its CRLF
    std::string_view line = all.substr(0, end);
    all.remove_prefix(end);
    if (!NamedInConnection(line.substr(0, line.find(':')), connection_)) kept.append(line);
  }
  fields_ = std::move(kept);
}

void UpstreamResponseParser::on_body_init_impl(const boost::optional<std::uint64_t>&,
                                               ErrorCode& ec) {
  ec = {};
}

// As Beast's buffer_body: copy what fits; need_buffer when not all did.
size_t UpstreamResponseParser::on_body_impl(StringView body, ErrorCode& ec) {
  if (body_data_ == nullptr) {
    ec = http::error::need_buffer;
    return 0;
  }
  size_t n = std::min(body.size(), body_room_);
  std::memcpy(body_data_, body.data(), n);
  body_data_ += n;
  body_room_ -= n;
  if (n == body.size())
    ec = {};
  else
    ec = http::error::need_buffer;
  return n;
}

void UpstreamResponseParser::on_chunk_header_impl(std::uint64_t, StringView, ErrorCode& ec) {
  ec = {};
}

size_t UpstreamResponseParser::on_chunk_body_impl(std::uint64_t, StringView body, ErrorCode& ec) {
  return on_body_impl(body, ec);
}

void UpstreamResponseParser::on_finish_impl(ErrorCode& ec) {
  ec = {};
}

}  // namespace geogate::proxy
