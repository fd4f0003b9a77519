// The relay's parse step, apart from the proxy so the SSE relay
// micro-benchmark (bench/micro/relay_bench.cc) times this code and not a
// copy of it; and the size of the relay's next read (RelayReadSize).
#pragma once

#include <cstddef>
#include <cstdint>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/system/error_code.hpp>

namespace geogate::proxy {

/// Parses what is already in `in` (bytes read from the backend) into `out`
/// after its first `got` bytes, without reading from the socket, so tokens
/// that arrived together leave in one write instead of a read-and-write
/// round each. (A Beast read_some parses one element -- a chunk header, or
/// one chunk's data -- per call even when more is buffered; its eager mode
/// would wait for more bytes. Here the parser is eager only over what is
/// buffered: put() takes every element up to a full `out` in one call.)
/// Stops at an incomplete element or a full
/// `out`; `ec` is set only for a malformed response. `Parser` is a Beast
/// response parser with a buffer_body. @return the new fill of `out`.
template <class Parser>
size_t ParseBufferedBody(Parser& parser, boost::beast::flat_buffer& in, char* out, size_t out_size,
                         size_t got, boost::system::error_code& ec) {
  namespace http = boost::beast::http;
  // Every element the bytes hold per put (chunk headers and data up to a
  // full `out`), not one: a burst of one-event chunks is one call, not two
  // a chunk. Set here, after the head: eager while the head is parsed, the
  // parser would go on into the body with no buffer for it.
  parser.eager(true);
  while (!parser.is_done() && in.size() > 0 && got < out_size) {
    parser.get().body().data = out + got;
    parser.get().body().size = out_size - got;
    size_t used = parser.put(in.data(), ec);
    in.consume(used);
    got = out_size - parser.get().body().size;
    if (ec == http::error::need_more || ec == http::error::need_buffer) {
      ec = {};
      break;
    }
    if (ec || used == 0) break;
  }
  return got;
}

/// How much the relay's next read from the backend asks for: `full` bytes
/// (its read buffer's size), or `trickle` while the stream trickles, so a
/// stream that waits most of its life for its next token waits with a
/// small buffer, not a full one (ProxyCall::Relay frees the full one).
///
/// A stream starts trickling: its first wait is for a token the backend is
/// still generating. A trickle read that comes back full means bytes are
/// queueing up: from then on the stream reads `full` bytes, until
/// kSmallReadsToTrickle reads in a row brought less than `trickle` bytes
/// again. Without that hysteresis, a fast stream whose reads alternated
/// between several tokens and one swapped its buffer for a small one and
/// back, and read a backlog in small pieces, on every other read.
class RelayReadSize {
 public:
  static constexpr uint32_t kSmallReadsToTrickle = 8;

  RelayReadSize(size_t full, size_t trickle) : full_(full), trickle_(trickle) {}

  bool trickling() const { return small_reads_ >= kSmallReadsToTrickle; }
  size_t next() const { return trickling() ? trickle_ : full_; }
  /// A read of the stream brought `n` bytes.
  void Read(size_t n) {
    if (n >= trickle_)
      small_reads_ = 0;
    else if (small_reads_ < kSmallReadsToTrickle)
      ++small_reads_;
  }

 private:
  size_t full_;
  size_t trickle_;
  uint32_t small_reads_ = kSmallReadsToTrickle;
};

}  // namespace geogate::proxy
