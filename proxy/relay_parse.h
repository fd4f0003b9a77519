// The relay's parse step, apart from the proxy so the SSE relay
// micro-benchmark (bench/micro/relay_bench.cc) times this code and not a
// copy of it; and the size of the relay's next read (BasicRelayReadSize).
#pragma once

#include <cstddef>
#include <cstdint>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/system/error_code.hpp>

#include "proxy/upstream_response_parser.h"

namespace geogate::proxy {

/// Parses what is already in `in` (bytes read from the backend) into `out`
/// after its first `got` bytes, without reading from the socket, so tokens
/// that arrived together leave in one write instead of a read-and-write
/// round each. (A Beast read_some parses one element -- a chunk header, or
/// one chunk's data -- per call even when more is buffered; its eager mode
/// would wait for more bytes. Here the parser is eager only over what is
/// buffered: put() takes every element up to a full `out` in one call.)
/// Stops at an incomplete element or a full
/// `out`; `ec` is set only for a malformed response. @return the new fill
/// of `out`.
inline size_t ParseBufferedBody(UpstreamResponseParser& parser, boost::beast::flat_buffer& in,
                                char* out, size_t out_size, size_t got,
                                boost::system::error_code& ec) {
  namespace http = boost::beast::http;
  // Every element the bytes hold per put (chunk headers and data up to a
  // full `out`), not one: a burst of one-event chunks is one call, not two
  // a chunk. Set here, after the head: eager while the head is parsed, the
  // parser would go on into the body with no buffer for it.
  parser.eager(true);
  while (!parser.is_done() && in.size() > 0 && got < out_size) {
    parser.set_body_buffer(out + got, out_size - got);
    size_t used = parser.put(in.data(), ec);
    in.consume(used);
    got = out_size - parser.body_room();
    if (ec == http::error::need_more || ec == http::error::need_buffer) {
      ec = {};
      break;
    }
    if (ec || used == 0) break;
  }
  return got;
}

/// Reads in a row that bring less than a trickle read's size before a
/// stream trickles again (BasicRelayReadSize).
inline constexpr uint32_t kSmallReadsToTrickle = 8;

/// How much the relay's next read from the backend asks for: `Full` bytes
/// (its read buffer's size), or `Trickle` while the stream trickles, so a
/// stream that waits most of its life for its next token waits with a
/// small buffer, not a full one (ShrinkWhileTrickling gives the full one
/// back).
///
/// A stream starts trickling: its first wait is for a token the backend is
/// still generating. A trickle read that comes back full means bytes are
/// queueing up: from then on the stream reads `Full` bytes, until
/// kSmallReadsToTrickle reads in a row brought less than `Trickle` bytes
/// again. Without that hysteresis, a fast stream whose reads alternated
/// between several tokens and one swapped its buffer for a small one and
/// back, and read a backlog in small pieces, on every other read.
///
/// The sizes are parameters of the type, not of each instance: the relay
/// keeps one of these per open stream (proxy.cc names its sizes).
template <size_t Full, size_t Trickle>
class BasicRelayReadSize {
 public:
  static_assert(Trickle < Full);

  bool trickling() const { return small_reads_ >= kSmallReadsToTrickle; }
  size_t next() const { return trickling() ? Trickle : Full; }
  /// A read of the stream brought `n` bytes.
  void Read(size_t n) {
    if (n >= Trickle)
      small_reads_ = 0;
    else if (small_reads_ < kSmallReadsToTrickle)
      ++small_reads_;
  }
  /// While the stream trickles, gives `buf` back for one with room for a
  /// trickle read beside what it holds (normally the last chunk's CRLF,
  /// which Beast parses with the next chunk's size): a stream then waits
  /// for its next token with a small buffer. A buffer already that small,
  /// or holding a trickle read's worth of bytes, is kept.
  void ShrinkWhileTrickling(boost::beast::flat_buffer& buf) const {
    if (!trickling()) return;
    const size_t want = buf.size() + Trickle;
    if (buf.capacity() <= want || buf.size() >= Trickle) return;
    boost::beast::flat_buffer small;
    small.reserve(want);
    small.commit(boost::asio::buffer_copy(small.prepare(buf.size()), buf.data()));
    buf = std::move(small);
  }

 private:
  uint32_t small_reads_ = kSmallReadsToTrickle;
};

}  // namespace geogate::proxy
