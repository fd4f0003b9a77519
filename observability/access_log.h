// JSON access log, one line per request, written off the request path:
// workers append lines to their own buffer and hand whole batches to a
// writer thread. When the writer falls behind (a slow disk), batches beyond
// a bounded queue are dropped and counted instead of stalling a worker.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace geogate::observability {

/// How a request ended, from a fixed list (docs/observability.md).
enum class RequestOutcome : uint8_t {
  kCompleted,       // the whole response reached the client (any status)
  kRejected,        // the gateway answered with its own error, no backend failure involved
  kUpstreamFailed,  // the gateway answered 502/504 after every backend attempt failed
  kInterrupted,     // a backend failed after the response head reached the client
  kClientClosed,    // the client went away before the response was complete
};

/// "completed", "rejected", "upstream_failed", "interrupted", "client_closed".
std::string_view RequestOutcomeName(RequestOutcome outcome);

/// Everything an access-log line says about one request.
struct AccessRecord {
  int64_t unix_ms = 0;
  std::string_view request_id;
  std::string_view edge;
  std::string_view client_ip;
  std::string_view method;
  std::string_view path;
  std::string_view model;
  std::string_view tenant;
  unsigned status = 0;
  RequestOutcome outcome = RequestOutcome::kCompleted;
  std::string_view error_code;      // the gateway's error code, when there is one
  std::string_view upstream_error;  // health::FailureReasonName, when a backend failure ended it
  std::string_view backend;
  std::string_view region;
  bool stream = false;
  double ttft_ms = -1;
  double duration_ms = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint32_t attempts = 0;
  std::string_view route_reason;
  // residency evidence
  std::string_view country;
  std::string_view continent;
  std::string_view rule;
  std::string_view allowed;  // comma-separated region names
  std::string_view policy_hash;
  uint64_t generation = 0;  // of the runtime that decided the request
  uint64_t geo_epoch = 0;
  // token accounting
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  bool tokens_estimated = false;
  double gpu_seconds = 0;
  double cost = 0;
};

/// Appends `r` as one JSON line (with the trailing newline) to `out`.
void FormatAccessRecord(const AccessRecord& r, std::string& out);

class AccessLog {
 public:
  /// @param path "-" for stdout, "" to disable, else a file opened for append.
  static std::unique_ptr<AccessLog> Open(const std::string& path, std::string* error);
  ~AccessLog();

  /// Thread-safe: whether lines are written (a path was given, and the log
  /// is not closed yet).
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  /// Thread-safe: queue a batch of lines for the writer thread; dropped
  /// when the log is disabled or closed.
  void Submit(std::string&& batch);
  /// Thread-safe: reopen the file (after log rotation); no-op for stdout.
  void Reopen();
  /// Writes everything queued and stops the writer.
  void Close();
  uint64_t dropped_batches() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t written_bytes() const { return written_.load(std::memory_order_relaxed); }

 private:
  AccessLog(std::string path, int fd, bool owns_fd);
  void Run();

  const std::string path_;
  // The writer thread's alone once it runs (it reassigns it on a reopen);
  // workers never look at it, they ask enabled_. Close() uses it after
  // joining the writer.
  int fd_ = -1;
  const bool owns_fd_;
  std::atomic<bool> enabled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  bool stop_ = false;
  bool reopen_ = false;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> written_{0};
  std::thread thread_;
};

/// A worker's own buffer in front of the shared AccessLog.
class AccessLogBuffer {
 public:
  explicit AccessLogBuffer(AccessLog* sink) : sink_(sink) {}
  bool enabled() const { return sink_ != nullptr && sink_->enabled(); }
  void Append(const AccessRecord& r) {
    if (!enabled()) return;
    FormatAccessRecord(r, buf_);
    if (buf_.size() >= kFlushBytes) Flush();
  }
  void Flush() {
    if (buf_.empty() || sink_ == nullptr) return;
    sink_->Submit(std::move(buf_));
    buf_.clear();
    buf_.reserve(kFlushBytes + 1024);
  }

 private:
  static constexpr size_t kFlushBytes = 32 * 1024;
  AccessLog* sink_;
  std::string buf_;
};

}  // namespace geogate::observability
