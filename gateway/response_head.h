// The response head the gateway sends for a proxied response, serialised
// once into a string so it can leave in the same write as the first body
// bytes (one syscall, one TCP segment for small first tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/fields.hpp>

namespace geogate::gateway {

namespace http = boost::beast::http;

class ResponseHead {
 public:
  ResponseHead(unsigned status, std::string_view reason, unsigned version)
      : status_(status), reason_(reason), version_(version) {}

  http::fields& fields() { return fields_; }
  /// Content-Length when `length` is known, else chunked when `chunked`,
  /// else close-delimited; Connection as `keep_alive` demands for the
  /// client's HTTP version.
  void SetFraming(std::optional<uint64_t> length, bool chunked, bool keep_alive);
  /// The serialised head, ending with the blank line.
  const std::string& text();

 private:
  unsigned status_;
  std::string reason_;
  unsigned version_;
  http::fields fields_;
  std::string text_;
};

}  // namespace geogate::gateway
