#include "gateway/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "gateway/openai_error.h"

namespace geogate::gateway {

namespace {

constexpr size_t kMaxQueuedBytes = 64 * 1024 * 1024;

// "2026-11-30T22:55:04.123Z". The text up to the seconds changes once a
// second, so each thread keeps it for the current second: gmtime_r takes
// glibc's time-zone lock and snprintf parses its format, both per request
// in the profile before.
void AppendTimestamp(std::string& out, int64_t unix_ms) {
  struct SecondText {
    int64_t second = INT64_MIN;
    char text[48];
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
  out.append(cached.text, cached.size);
  const char digits[4] = {static_cast<char>('0' + ms / 100), static_cast<char>('0' + ms / 10 % 10),
                          static_cast<char>('0' + ms % 10), 'Z'};
  out.append(digits, sizeof digits);
}

void Key(std::string& out, std::string_view name) {
  out += ",\"";
  out += name;
  out += "\":";
}

void Field(std::string& out, std::string_view name, std::string_view v) {
  Key(out, name);
  AppendJsonString(out, v);
}

// std::to_chars, not snprintf: one line per request, and printf's locale
// and format parsing showed up in the profile. Same text as "%.<digits>f".
void Number(std::string& out, std::string_view name, double v, int digits = 3) {
  Key(out, name);
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, digits);
  if (r.ec != std::errc()) {  // beyond 1e50: not a duration or a price
    out += '0';
    return;
  }
  out.append(buf, r.ptr);
}

void Integer(std::string& out, std::string_view name, int64_t v) {
  Key(out, name);
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

void FormatAccessRecord(const AccessRecord& r, std::string& out) {
  out += "{\"ts\":\"";
  AppendTimestamp(out, r.unix_ms);
  out += '"';
  Field(out, "request_id", r.request_id);
  Field(out, "edge", r.edge);
  Field(out, "client_ip", r.client_ip);
  Field(out, "method", r.method);
  Field(out, "path", r.path);
  Field(out, "model", r.model);
  if (!r.tenant.empty()) Field(out, "tenant", r.tenant);
  Integer(out, "status", r.status);
  if (!r.error_code.empty()) Field(out, "error", r.error_code);
  Field(out, "backend", r.backend);
  Field(out, "region", r.region);
  out += r.stream ? ",\"stream\":true" : ",\"stream\":false";
  if (r.ttft_ms >= 0)
    Number(out, "ttft_ms", r.ttft_ms);
  else
    out += ",\"ttft_ms\":null";
  Number(out, "duration_ms", r.duration_ms);
  Integer(out, "bytes_in", static_cast<int64_t>(r.bytes_in));
  Integer(out, "bytes_out", static_cast<int64_t>(r.bytes_out));
  Integer(out, "attempts", r.attempts);
  Field(out, "route", r.route_reason);
  out += ",\"residency\":{\"country\":";
  AppendJsonString(out, r.country);
  Field(out, "continent", r.continent);
  Field(out, "rule", r.rule);
  Field(out, "allowed", r.allowed);
  Field(out, "policy", r.policy_hash);
  Integer(out, "geo_epoch", static_cast<int64_t>(r.geo_epoch));
  out += '}';
  if (r.prompt_tokens >= 0) {
    Integer(out, "prompt_tokens", r.prompt_tokens);
    Integer(out, "completion_tokens", r.completion_tokens);
    out += r.tokens_estimated ? ",\"tokens_estimated\":true" : ",\"tokens_estimated\":false";
    Number(out, "gpu_seconds", r.gpu_seconds, 6);
    Number(out, "cost", r.cost, 8);
  }
  out += "}\n";
}

std::unique_ptr<AccessLog> AccessLog::Open(const std::string& path, std::string* error) {
  if (path.empty()) return std::unique_ptr<AccessLog>(new AccessLog(path, -1));
  if (path == "-") return std::unique_ptr<AccessLog>(new AccessLog(path, STDOUT_FILENO));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    if (error) *error = "cannot open access log " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  auto log = std::unique_ptr<AccessLog>(new AccessLog(path, fd));
  log->owns_fd_ = true;
  return log;
}

AccessLog::AccessLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
  if (fd_ >= 0) thread_ = std::thread([this] { Run(); });
}

AccessLog::~AccessLog() {
  Close();
}

void AccessLog::Submit(std::string&& batch) {
  if (fd_ < 0 || batch.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
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

}  // namespace geogate::gateway
