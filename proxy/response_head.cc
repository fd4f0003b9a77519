#include "proxy/response_head.h"

#include <charconv>

#include <boost/beast/http/status.hpp>

#include "proxy/header_line.h"

namespace geogate::proxy {

ResponseHead::ResponseHead(unsigned status, std::string_view reason, unsigned version)
    : version_(version) {
  text_.reserve(common::kPooledStringMax);
  text_ += version >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ";
  char num[16];
  auto [end, ec] = std::to_chars(num, num + sizeof num, status);
  text_.append(num, end);
  text_ += ' ';
  if (reason.empty())
    text_ += http::obsolete_reason(static_cast<http::status>(status));
  else
    text_ += reason;
  text_ += "\r\n";
}

void ResponseHead::insert(std::string_view name, std::string_view value) {
  AppendHeaderLine(text_, name, value);
}

void ResponseHead::SetFraming(std::optional<uint64_t> length, bool chunked, bool keep_alive) {
  if (length) {
    char num[24];
    auto [end, ec] = std::to_chars(num, num + sizeof num, *length);
    insert(http::to_string(http::field::content_length), std::string_view(num, end - num));
  } else if (chunked) {
    insert(http::to_string(http::field::transfer_encoding), "chunked");
  }
  if (version_ >= 11 && !keep_alive) insert(http::to_string(http::field::connection), "close");
  if (version_ < 11 && keep_alive) insert(http::to_string(http::field::connection), "keep-alive");
  text_ += "\r\n";
}

}  // namespace geogate::proxy
