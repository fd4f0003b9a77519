#include "gateway/response_head.h"

#include <boost/beast/http/status.hpp>

namespace geogate::gateway {

void ResponseHead::SetFraming(std::optional<uint64_t> length, bool chunked, bool keep_alive) {
  fields_.erase(http::field::content_length);
  fields_.erase(http::field::transfer_encoding);
  fields_.erase(http::field::connection);
  if (length)
    fields_.set(http::field::content_length, std::to_string(*length));
  else if (chunked)
    fields_.set(http::field::transfer_encoding, "chunked");
  if (version_ >= 11 && !keep_alive) fields_.set(http::field::connection, "close");
  if (version_ < 11 && keep_alive) fields_.set(http::field::connection, "keep-alive");
  text_.clear();
}

const std::string& ResponseHead::text() {
  if (!text_.empty()) return text_;
  text_.reserve(256);
  text_ += version_ >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ";
  text_ += std::to_string(status_);
  text_ += ' ';
  if (reason_.empty())
    text_ += http::obsolete_reason(static_cast<http::status>(status_));
  else
    text_ += reason_;
  text_ += "\r\n";
  for (const auto& f : fields_) {
    text_ += f.name_string();
    text_ += ": ";
    text_ += f.value();
    text_ += "\r\n";
  }
  text_ += "\r\n";
  return text_;
}

}  // namespace geogate::gateway
