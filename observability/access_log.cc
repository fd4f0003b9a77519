#include "observability/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "common/json_text.h"

namespace geogate::observability {

namespace {

constexpr size_t kMaxQueuedBytes = 64 * 1024 * 1024;

}  // namespace

std::string_view RequestOutcomeName(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::kCompleted:
      return "completed";
    case RequestOutcome::kRejected:
      return "rejected";
    case RequestOutcome::kUpstreamFailed:
      return "upstream_failed";
    case RequestOutcome::kInterrupted:
      return "interrupted";
    case RequestOutcome::kClientClosed:
      return "client_closed";
  }
  return "completed";
}

namespace {

// Writes one line into memory that has room for all of it (LineBounder), by
// pointer: a line was about sixty std::string appends, each checking
// capacity and calling memcpy, and that bookkeeping cost more than the
// bytes (callgrind: formatting was a fifth of a plain request's user-space
// instructions).
class LineWriter {
 public:
  explicit LineWriter(char* p) : p_(p) {}
  char* end() const { return p_; }

  template <size_t N>
  void Text(const char (&s)[N]) {
    std::memcpy(p_, s, N - 1);
    p_ += N - 1;
  }
  // A member: `key` is its whole literal prefix, e.g. R"(,"edge":)".
  template <size_t N>
  void String(const char (&key)[N], std::string_view v) {
    Text(key);
    p_ = common::WriteJsonString(p_, v);
  }
  template <size_t N>
  void Integer(const char (&key)[N], int64_t v) {
    Text(key);
    p_ = std::to_chars(p_, p_ + kNumberBytes, v).ptr;
  }
  // Same text as "%.<digits>f" (0 to 8 digits): see WriteFixed.
  template <size_t N>
  void Fixed(const char (&key)[N], double v, int digits) {
    Text(key);
    p_ = common::WriteFixed(p_, v, digits);
  }
  template <size_t N>
  void Bool(const char (&key)[N], bool v) {
    Text(key);
    if (v)
      Text("true");
    else
      Text("false");
  }

  // "2026-11-30T22:55:04.123Z". The text up to the seconds changes once a
  // second, so each thread keeps it for the current second: gmtime_r takes
  // glibc's time-zone lock and snprintf parses its format, both per
  // request in the profile before.
  void Timestamp(int64_t unix_ms) {
    struct SecondText {
      int64_t second = INT64_MIN;
      char text[kTimestampBytes - 4];
      size_t size = 0;
    };
    thread_local SecondText cached;
    int64_t second = unix_ms / 1000;
    int64_t ms = unix_ms % 1000;
    if (ms < 0) {  // floor for times before 1970, as gmtime sees them
      second -= 1;
      ms += 1000;
    }
    if (second != cached.second) {
      time_t secs = static_cast<time_t>(second);
      struct tm tm;
      gmtime_r(&secs, &tm);
      int n = std::snprintf(cached.text, sizeof cached.text, "%04d-%02d-%02dT%02d:%02d:%02d.",
                            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                            tm.tm_sec);
      cached.size = n > 0 ? std::min(static_cast<size_t>(n), sizeof cached.text - 1) : 0;
      cached.second = second;
    }
    std::memcpy(p_, cached.text, cached.size);
    p_ += cached.size;
    *p_++ = static_cast<char>('0' + ms / 100);
    *p_++ = static_cast<char>('0' + ms / 10 % 10);
    *p_++ = static_cast<char>('0' + ms % 10);
    *p_++ = 'Z';
  }

  // Room for any number above (to_chars fails rather than overrun it).
  static constexpr size_t kNumberBytes = 64;
  static_assert(kNumberBytes >= common::kFixedBytes);
  // Room for any timestamp: the cached text and ".mmmZ".
  static constexpr size_t kTimestampBytes = 48 + 4;

 private:
  char* p_;
};

// Adds up what LineWriter would need at most for the same calls, so the
// bound and the line come from one list of members (WriteAccessRecord)
// and a member added to the line cannot outgrow the memory given to it.
class LineBounder {
 public:
  size_t bound() const { return n_; }

  template <size_t N>
  void Text(const char (&)[N]) {
    n_ += N - 1;
  }
  template <size_t N>
  void String(const char (&)[N], std::string_view v) {
    n_ += N - 1 + common::JsonStringBound(v);
  }
  template <size_t N>
  void Integer(const char (&)[N], int64_t) {
    n_ += N - 1 + LineWriter::kNumberBytes;
  }
  template <size_t N>
  void Fixed(const char (&)[N], double, int) {
    n_ += N - 1 + LineWriter::kNumberBytes;
  }
  template <size_t N>
  void Bool(const char (&)[N], bool) {
    n_ += N - 1 + 5;
  }
  void Timestamp(int64_t) { n_ += LineWriter::kTimestampBytes; }

 private:
  size_t n_ = 0;
};

template <class Writer>
void WriteAccessRecord(const AccessRecord& r, Writer& w) {
  w.Text(R"({"ts":")");
  w.Timestamp(r.unix_ms);
  w.String(R"(","request_id":)", r.request_id);
  w.String(R"(,"edge":)", r.edge);
  w.String(R"(,"client_ip":)", r.client_ip);
  w.String(R"(,"method":)", r.method);
  w.String(R"(,"path":)", r.path);
  w.String(R"(,"model":)", r.model);
  if (!r.tenant.empty()) w.String(R"(,"tenant":)", r.tenant);
  w.Integer(R"(,"status":)", r.status);
  w.String(R"(,"outcome":)", RequestOutcomeName(r.outcome));
  if (!r.error_code.empty()) w.String(R"(,"error":)", r.error_code);
  if (!r.upstream_error.empty()) w.String(R"(,"upstream_error":)", r.upstream_error);
  w.String(R"(,"backend":)", r.backend);
  w.String(R"(,"region":)", r.region);
  w.Bool(R"(,"stream":)", r.stream);
  if (r.ttft_ms >= 0) {
    w.Fixed(R"(,"ttft_ms":)", r.ttft_ms, 3);
  } else {
    w.Text(R"(,"ttft_ms":null)");
  }
  w.Fixed(R"(,"duration_ms":)", r.duration_ms, 3);
  w.Integer(R"(,"bytes_in":)", static_cast<int64_t>(r.bytes_in));
  w.Integer(R"(,"bytes_out":)", static_cast<int64_t>(r.bytes_out));
  w.Integer(R"(,"attempts":)", r.attempts);
  w.String(R"(,"route":)", r.route_reason);
  w.String(R"(,"residency":{"country":)", r.country);
  w.String(R"(,"continent":)", r.continent);
  w.String(R"(,"rule":)", r.rule);
  w.String(R"(,"allowed":)", r.allowed);
  w.String(R"(,"policy":)", r.policy_hash);
  w.Integer(R"(,"generation":)", static_cast<int64_t>(r.generation));
  w.Integer(R"(,"geo_epoch":)", static_cast<int64_t>(r.geo_epoch));
  w.Text("}");
  if (r.prompt_tokens >= 0) {
    w.Integer(R"(,"prompt_tokens":)", r.prompt_tokens);
    w.Integer(R"(,"completion_tokens":)", r.completion_tokens);
    w.Bool(R"(,"tokens_estimated":)", r.tokens_estimated);
    w.Fixed(R"(,"gpu_seconds":)", r.gpu_seconds, 6);
    w.Fixed(R"(,"cost":)", r.cost, 8);
  }
  w.Text("}\n");
}

}  // namespace

void FormatAccessRecord(const AccessRecord& r, std::string& out) {
  // Nearly every line is written on the stack and appended in one go; one
  // with very long strings in place at the end of `out`.
  constexpr size_t kStackLine = 8192;
  LineBounder bounder;
  WriteAccessRecord(r, bounder);
  size_t bound = bounder.bound();
  if (bound <= kStackLine) {
    char buf[kStackLine];
    LineWriter w(buf);
    WriteAccessRecord(r, w);
    assert(static_cast<size_t>(w.end() - buf) <= bound);
    out.append(buf, w.end());
    return;
  }
  size_t old = out.size();
  out.resize(old + bound);
  LineWriter w(out.data() + old);
  WriteAccessRecord(r, w);
  out.resize(static_cast<size_t>(w.end() - out.data()));
}

std::unique_ptr<AccessLog> AccessLog::Open(const std::string& path, std::string* error) {
  if (path.empty()) return std::unique_ptr<AccessLog>(new AccessLog(path, -1, false));
  if (path == "-") return std::unique_ptr<AccessLog>(new AccessLog(path, STDOUT_FILENO, false));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    if (error) *error = "cannot open access log " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<AccessLog>(new AccessLog(path, fd, true));
}

AccessLog::AccessLog(std::string path, int fd, bool owns_fd)
    : path_(std::move(path)), fd_(fd), owns_fd_(owns_fd) {
  if (fd_ < 0) return;
  enabled_.store(true, std::memory_order_relaxed);
  thread_ = std::thread([this] { Run(); });
}

AccessLog::~AccessLog() {
  Close();
}

void AccessLog::Submit(std::string&& batch) {
  if (!enabled() || batch.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;  // closed meanwhile: the writer is gone
    if (queued_bytes_ + batch.size() > kMaxQueuedBytes) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queued_bytes_ += batch.size();
    queue_.push_back(std::move(batch));
  }
  cv_.notify_one();
}

void AccessLog::Reopen() {
  if (!owns_fd_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reopen_ = true;
  }
  cv_.notify_one();
}

void AccessLog::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  enabled_.store(false, std::memory_order_relaxed);
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();  // after this, fd_ is ours
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void AccessLog::Run() {
  std::deque<std::string> work;
  for (;;) {
    bool reopen = false, stop = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || reopen_ || !queue_.empty(); });
      work.swap(queue_);
      queued_bytes_ = 0;
      reopen = reopen_;
      reopen_ = false;
      stop = stop_;
    }
    for (const std::string& batch : work) {
      size_t off = 0;
      while (off < batch.size()) {
        ssize_t n = ::write(fd_, batch.data() + off, batch.size() - off);
        if (n < 0) {
          if (errno == EINTR) continue;
          break;  // a broken log must not take the gateway down
        }
        off += static_cast<size_t>(n);
      }
      written_.fetch_add(off, std::memory_order_relaxed);
    }
    work.clear();
    if (reopen) {
      int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
      if (fd >= 0) {
        ::close(fd_);
        fd_ = fd;
      }
    }
    if (stop) return;
  }
}

}  // namespace geogate::observability
