// A Beast body held in a std::basic_string that grows with the bytes that
// arrive. Beast's basic_string_body reserves the whole Content-Length when
// the head is parsed, so a client that announces max_body_bytes and then
// sends slowly (or never) pins that much memory per connection; here memory
// follows what was received: about twice it at most (the string doubles).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/optional/optional.hpp>

namespace geogate::proxy {

/// What a reader reserves before the first body byte, at most: a typical
/// chat request fits, and one read of the socket is no larger.
inline constexpr std::size_t kBodyInitialReserve = 16 * 1024;

template <class Allocator>
struct GrowingStringBody {
  using value_type = std::basic_string<char, std::char_traits<char>, Allocator>;

  static std::uint64_t size(const value_type& body) { return body.size(); }

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) {
      ec = {};
      if (length && *length > body_.max_size()) {
        ec = boost::beast::http::error::buffer_overflow;
        return;
      }
      expected_ = length.value_or(0);
      if (length)
        body_.reserve(
            static_cast<std::size_t>(std::min<std::uint64_t>(*length, kBodyInitialReserve)));
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      const std::size_t extra = boost::beast::buffer_bytes(buffers);
      const std::size_t size = body_.size();
      if (extra > body_.max_size() - size) {
        ec = boost::beast::http::error::buffer_overflow;
        return 0;
      }
      const std::size_t need = size + extra;
      if (need > body_.capacity()) {
        // Doubling keeps the copies linear; the announced length caps it.
        std::size_t grow = std::max(need, 2 * body_.capacity());
        if (expected_ >= need)
          grow = static_cast<std::size_t>(std::min<std::uint64_t>(grow, expected_));
        body_.reserve(grow);
      }
      body_.resize(need);
      char* dest = body_.data() + size;
      for (auto b : boost::beast::buffers_range_ref(buffers)) {
        std::char_traits<char>::copy(dest, static_cast<const char*>(b.data()), b.size());
        dest += b.size();
      }
      ec = {};
      return extra;
    }

    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
    std::uint64_t expected_ = 0;  // Content-Length; 0 when chunked
  };

  // Serialising needs nothing different.
  using writer = typename boost::beast::http::basic_string_body<char, std::char_traits<char>,
                                                                Allocator>::writer;
};

}  // namespace geogate::proxy
