// What goes to the client of a proxied response, written in one place: the
// head, the body in the framing chosen for it (chunked, or as the backend
// framed it), and the end of the body (the last chunk, after the bytes the
// SSE observer held back, or after one error event when the backend failed
// mid-stream).
//
// Each piece is one gather write: [head] [chunk size] data [CRLF]. It is
// first offered to the socket at once (Stream::TrySendNow): an async_write
// that completes at once still resumes its coroutine only after a pass of
// the worker's ready queue, which under load is what delays a new
// request's first token. Only what the socket did not take is written
// asynchronously, under the connection's stream-idle deadline.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>

#include "health/time_source.h"
#include "proxy/stream.h"
#include "proxy/watchdog.h"

namespace geogate::proxy {

class ClientWriter {
 public:
  /// @param idle_timeout the longest a write may wait for the client
  ///        (gateway.upstream.stream_idle_timeout_ms), on `wd`'s deadline.
  /// @param bytes_out where every byte that reached the socket is added
  ///        (the request's count and the worker's, for example).
  ClientWriter(Stream& client, Watchdog& wd, const health::TimeSource& time,
               health::Millis idle_timeout, uint64_t& request_bytes, uint64_t& worker_bytes)
      : client_(client),
        wd_(wd),
        time_(time),
        idle_timeout_(idle_timeout),
        request_bytes_(request_bytes),
        worker_bytes_(worker_bytes) {}
  ClientWriter(const ClientWriter&) = delete;
  ClientWriter& operator=(const ClientWriter&) = delete;

  /// Chunked framing for the body from now on (or not: bytes as they come).
  void set_chunked(bool chunked) { chunked_ = chunked; }
  bool chunked() const { return chunked_; }

  /// Offers `head` (when not empty) and `data`, framed, to the socket at
  /// once. @return true when all of it went; otherwise Flush writes the rest.
  /// `head` and `data` must stay valid until then.
  bool TryWrite(std::string_view head, std::string_view data);
  /// Writes what TryWrite left. @return false when the client is gone.
  boost::asio::awaitable<bool> Flush();
  /// The end of a chunked body: `rest` (bytes held back until the end,
  /// may be empty) as a last data chunk, then the terminating chunk.
  /// Nothing for a body not chunked. @return false when the client is gone.
  boost::asio::awaitable<bool> End(std::string_view rest);
  /// TryWrite of the body's last bytes and its end in one gather write:
  /// `head` (when not empty), `data` and `rest` (what the observer held
  /// back) as one chunk, then the terminating chunk. Not chunked: `data`
  /// and `rest` as they are. The bytes that reach the client are those of
  /// TryWrite(head, data) followed by End(rest), framed in one chunk
  /// instead of two, in one system call instead of two.
  /// @return true when all of it went; otherwise Flush writes the rest,
  /// and data_reached() says whether `data` got out before a failure.
  bool TryWriteLast(std::string_view head, std::string_view data, std::string_view rest);
  /// After a failed Flush of TryWriteLast: whether everything up to the
  /// end of `data` reached the socket (so only the end was lost).
  bool data_reached() const { return done_ >= data_end_; }

  /// The pieces TryWrite would write for `head` and `data` (tests, and
  /// TryWrite itself). @return how many of `out` are used.
  size_t Frame(std::string_view head, std::string_view data,
               std::array<boost::asio::const_buffer, 6>& out);

 private:
  void Count(size_t n);

  Stream& client_;
  Watchdog& wd_;
  const health::TimeSource& time_;
  health::Millis idle_timeout_;
  uint64_t& request_bytes_;
  uint64_t& worker_bytes_;
  bool chunked_ = false;
  // The write in progress: its pieces, their size, and what went at once.
  std::array<boost::asio::const_buffer, 6> bufs_;
  size_t count_ = 0;
  size_t total_ = 0;
  size_t sent_ = 0;
  // TryWriteLast: where its `data` ends in the write, and what of the
  // write reached the socket.
  size_t data_end_ = 0;
  size_t done_ = 0;
  char size_line_[24];
};

}  // namespace geogate::proxy
