#include "proxy/client_writer.h"

#include <charconv>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>

#include "common/await.h"

namespace geogate::proxy {

size_t ClientWriter::Frame(std::string_view head, std::string_view data,
                           std::array<net::const_buffer, 6>& out) {
  size_t n = 0;
  if (!head.empty()) out[n++] = net::buffer(head);
  if (data.empty()) return n;
  if (chunked_) {
    char* end = std::to_chars(size_line_, size_line_ + 16, data.size(), 16).ptr;
    *end++ = '\r';
    *end++ = '\n';
    out[n++] = net::buffer(size_line_, static_cast<size_t>(end - size_line_));
  }
  out[n++] = net::buffer(data);
  if (chunked_) out[n++] = net::buffer("\r\n", 2);
  return n;
}

bool ClientWriter::TryWrite(std::string_view head, std::string_view data) {
  count_ = Frame(head, data, bufs_);
  total_ = 0;
  sent_ = 0;
  if (count_ == 0) return true;
  std::span<const net::const_buffer> bufs(bufs_.data(), count_);
  total_ = net::buffer_size(bufs);
  sent_ = client_.TrySendNow(bufs);
  if (sent_ != total_) return false;
  Count(total_);
  count_ = 0;
  return true;
}

bool ClientWriter::TryWriteLast(std::string_view head, std::string_view data,
                                std::string_view rest) {
  static constexpr std::string_view kLastChunk = "0\r\n\r\n";
  static constexpr std::string_view kEndAndLastChunk = "\r\n0\r\n\r\n";
  count_ = 0;
  if (!head.empty()) bufs_[count_++] = net::buffer(head);
  size_t body = data.size() + rest.size();
  if (chunked_ && body > 0) {
    char* end = std::to_chars(size_line_, size_line_ + 16, body, 16).ptr;
    *end++ = '\r';
    *end++ = '\n';
    bufs_[count_++] = net::buffer(size_line_, static_cast<size_t>(end - size_line_));
  }
  if (!data.empty()) bufs_[count_++] = net::buffer(data);
  data_end_ = net::buffer_size(std::span<const net::const_buffer>(bufs_.data(), count_));
  if (!rest.empty()) bufs_[count_++] = net::buffer(rest);
  if (chunked_) bufs_[count_++] = net::buffer(body > 0 ? kEndAndLastChunk : kLastChunk);
  std::span<const net::const_buffer> bufs(bufs_.data(), count_);
  total_ = net::buffer_size(bufs);
  sent_ = total_ == 0 ? 0 : client_.TrySendNow(bufs);
  done_ = sent_;
  if (sent_ != total_) return false;
  Count(total_);
  count_ = 0;
  return true;
}

net::awaitable<bool> ClientWriter::Flush() {
  if (count_ == 0) co_return true;
  std::span<const net::const_buffer> bufs(bufs_.data(), count_);
  beast::buffers_suffix<std::span<const net::const_buffer>> rest(bufs);
  rest.consume(sent_);
  wd_.Guard(&client_, time_.monotonic() + idle_timeout_);
  auto [ec, n] = co_await net::async_write(client_, rest, common::kAwait);
  done_ = sent_ + n;
  Count(sent_ + n);
  count_ = 0;
  co_return !ec;
}

net::awaitable<bool> ClientWriter::End(std::string_view rest) {
  if (!chunked_) co_return true;
  // The last data chunk (if any) and the terminating one, in one write.
  static constexpr std::string_view kLastChunk = "0\r\n\r\n";
  count_ = Frame({}, rest, bufs_);
  bufs_[count_++] = net::buffer(kLastChunk);
  std::span<const net::const_buffer> bufs(bufs_.data(), count_);
  total_ = net::buffer_size(bufs);
  sent_ = client_.TrySendNow(bufs);
  if (sent_ == total_) {
    Count(total_);
    count_ = 0;
    co_return true;
  }
  co_return co_await Flush();
}

void ClientWriter::Count(size_t n) {
  request_bytes_ += n;
  worker_bytes_ += n;
}

}  // namespace geogate::proxy
