#include "accounting/showback_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "accounting/showback_line.h"

namespace geogate::accounting {
namespace {

constexpr int64_t kHourMs = 3600 * 1000;
/// A line longer than this is garbage (a real line is a few hundred bytes);
/// it is skipped without being held in memory.
constexpr size_t kMaxLineBytes = 1 << 20;

int64_t WindowStart(int64_t now_unix_ms, uint32_t window_hours) {
  return MinuteOf(now_unix_ms) - static_cast<int64_t>(window_hours) * kHourMs;
}

}  // namespace

ShowbackStoreOptions ShowbackStoreOptions::From(const config::Snapshot& snap) {
  return {snap.showback.file, snap.showback.window_hours, snap.gateway.edge};
}

ShowbackStore::~ShowbackStore() {
  std::lock_guard<std::mutex> lock(mu_);
  CloseFileLocked();
}

absl::StatusOr<ShowbackReplay> ShowbackStore::Open(const ShowbackStoreOptions& options,
                                                   int64_t now_unix_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  CloseFileLocked();
  options_ = options;
  ShowbackReplay replay;
  if (options_.file.empty()) return replay;

  int in = ::open(options_.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0 && errno != ENOENT) {
    return absl::UnavailableError(
        absl::StrCat("cannot read showback file ", options_.file, ": ", std::strerror(errno)));
  }
  if (in >= 0) {
    int64_t window_start = WindowStart(now_unix_ms, options_.window_hours);
    int32_t this_month = UtcMonthOf(now_unix_ms);
    uint64_t line_no = 0;
    std::string line;
    bool skipping = false;  // inside an over-long line
    auto take_line = [&](bool complete) {
      ++line_no;
      if (skipping) {
        skipping = false;
        ++replay.lines;
        ++replay.malformed;
        if (replay.first_error.empty())
          replay.first_error = absl::StrCat("line ", line_no, ": longer than ", kMaxLineBytes);
        return;
      }
      if (line.empty()) return;
      ++replay.lines;
      auto b = ParseShowbackLine(line);
      if (!b.ok()) {
        ++replay.malformed;
        if (!complete) replay.torn_tail = true;
        if (replay.first_error.empty())
          replay.first_error = absl::StrCat("line ", line_no, ": ", b.status().message());
        return;
      }
      int32_t month = UtcMonthOf(b->minute_ms);
      if (month >= this_month - 1) month_spend_[month][b->dims[0]] += b->usage.cost;
      if (b->minute_ms < window_start) {
        ++replay.outside_window;
        return;
      }
      AddLocked(*b);
      ++replay.loaded;
    };
    char buf[65536];
    bool read_error = false;
    int saved_errno = 0;
    for (;;) {
      ssize_t n = ::read(in, buf, sizeof buf);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        read_error = true;
        saved_errno = errno;
        break;
      }
      std::string_view chunk(buf, static_cast<size_t>(n));
      while (!chunk.empty()) {
        size_t nl = chunk.find('\n');
        std::string_view part = chunk.substr(0, nl);
        if (!skipping) {
          if (line.size() + part.size() > kMaxLineBytes) {
            skipping = true;
            line.clear();
          } else {
            line.append(part.data(), part.size());
          }
        }
        if (nl == std::string_view::npos) break;
        take_line(/*complete=*/true);
        line.clear();
        chunk.remove_prefix(nl + 1);
      }
    }
    if (!line.empty() || skipping) take_line(/*complete=*/false);
    ::close(in);
    if (read_error) {
      return absl::UnavailableError(absl::StrCat("cannot read showback file ", options_.file, ": ",
                                                 std::strerror(saved_errno)));
    }
  }
  PruneLocked(now_unix_ms);
  absl::Status opened = OpenFileLocked();
  if (!opened.ok()) return opened;
  return replay;
}

absl::Status ShowbackStore::Configure(const ShowbackStoreOptions& options, int64_t now_unix_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  bool new_file = options.file != options_.file;
  options_ = options;
  PruneLocked(now_unix_ms);
  if (!new_file) return absl::OkStatus();
  CloseFileLocked();
  return OpenFileLocked();
}

absl::Status ShowbackStore::Reopen() {
  std::lock_guard<std::mutex> lock(mu_);
  CloseFileLocked();
  return OpenFileLocked();
}

void ShowbackStore::Append(const std::vector<ShowbackBucket>& closed, int64_t now_unix_ms) {
  if (closed.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    PruneLocked(now_unix_ms);
    return;
  }
  // Every worker has its own ledger, so one (minute, key) arrives once per
  // worker that served it: merge them into one line.
  std::vector<const ShowbackBucket*> order;
  order.reserve(closed.size());
  for (const ShowbackBucket& b : closed)
    order.push_back(&b);
  std::sort(order.begin(), order.end(), [](const ShowbackBucket* a, const ShowbackBucket* b) {
    if (a->minute_ms != b->minute_ms) return a->minute_ms < b->minute_ms;
    return a->dims < b->dims;
  });
  std::vector<ShowbackBucket> merged;
  for (const ShowbackBucket* b : order) {
    if (!merged.empty() && merged.back().minute_ms == b->minute_ms &&
        merged.back().dims == b->dims) {
      merged.back().usage.Add(b->usage);
    } else {
      merged.push_back(*b);
    }
  }

  std::lock_guard<std::mutex> lock(mu_);
  std::string lines;
  int32_t this_month = UtcMonthOf(now_unix_ms);
  for (const ShowbackBucket& b : merged) {
    AddLocked(b);
    int32_t month = UtcMonthOf(b.minute_ms);
    if (month >= this_month - 1) month_spend_[month][b.dims[0]] += b.usage.cost;
    if (!options_.file.empty()) AppendShowbackLine(b, options_.edge, lines);
  }
  if (!lines.empty()) {
    if (fd_ < 0) {
      absl::Status st = OpenFileLocked();  // retry a file that could not be opened
      if (!st.ok()) {
        ++write_errors_;
        last_error_ = std::string(st.message());
      }
    }
    if (fd_ >= 0) WriteLocked(lines);
  }
  PruneLocked(now_unix_ms);
}

ShowbackResult ShowbackStore::Query(const ShowbackQuery& query,
                                    const std::vector<ShowbackBucket>& live) const {
  ShowbackAggregator agg(query);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Buckets overlapping [from, to): start in (from - 1 min, to).
    for (auto it = minutes_.upper_bound(query.from_ms - kMinuteMs);
         it != minutes_.end() && it->first < query.to_ms; ++it) {
      for (const auto& [id, usage] : it->second)
        agg.Add(it->first, ViewOf(dims_[id]), usage);
    }
  }
  if (query.live) {
    for (const ShowbackBucket& b : live)
      agg.Add(b);
  }
  return std::move(agg).Finish();
}

absl::flat_hash_map<std::string, double> ShowbackStore::MonthSpend(int64_t now_unix_ms) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = month_spend_.find(UtcMonthOf(now_unix_ms));
  if (it == month_spend_.end()) return {};
  return it->second;
}

ShowbackStoreStats ShowbackStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ShowbackStoreStats s;
  s.buckets = buckets_;
  s.oldest_minute_ms = minutes_.empty() ? 0 : minutes_.begin()->first;
  s.lines_written = lines_written_;
  s.write_errors = write_errors_;
  s.last_error = last_error_;
  return s;
}

uint32_t ShowbackStore::InternLocked(const ShowbackDims& dims) {
  auto [it, inserted] = dims_ids_.try_emplace(dims, static_cast<uint32_t>(dims_.size()));
  if (inserted) dims_.push_back(dims);
  return it->second;
}

void ShowbackStore::AddLocked(const ShowbackBucket& b) {
  Minute& minute = minutes_[b.minute_ms];
  auto [it, inserted] = minute.try_emplace(InternLocked(b.dims));
  if (inserted) ++buckets_;
  it->second.Add(b.usage);
}

void ShowbackStore::PruneLocked(int64_t now_unix_ms) {
  int64_t start = WindowStart(now_unix_ms, options_.window_hours);
  while (!minutes_.empty() && minutes_.begin()->first < start) {
    buckets_ -= minutes_.begin()->second.size();
    minutes_.erase(minutes_.begin());
  }
  int32_t this_month = UtcMonthOf(now_unix_ms);
  while (!month_spend_.empty() && month_spend_.begin()->first < this_month - 1)
    month_spend_.erase(month_spend_.begin());
}

absl::Status ShowbackStore::OpenFileLocked() {
  torn_ = false;
  if (options_.file.empty()) return absl::OkStatus();
  fd_ = ::open(options_.file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open showback file ", options_.file,
                                               " for appending: ", std::strerror(errno)));
  }
  // Does the file end mid-line? (The append descriptor cannot read.)
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && st.st_size > 0) {
    int in = ::open(options_.file.c_str(), O_RDONLY | O_CLOEXEC);
    char last = '\n';
    if (in >= 0 && ::pread(in, &last, 1, st.st_size - 1) == 1 && last != '\n') torn_ = true;
    if (in >= 0) ::close(in);
  }
  return absl::OkStatus();
}

void ShowbackStore::CloseFileLocked() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ShowbackStore::WriteLocked(std::string& lines) {
  // One write() of whole lines on an O_APPEND descriptor: concurrent
  // appenders cannot interleave inside it, and a reader (or a shipper
  // tailing the file) sees complete lines except after a failed write.
  if (torn_) lines.insert(lines.begin(), '\n');
  size_t done = 0;
  while (done < lines.size()) {
    ssize_t n = ::write(fd_, lines.data() + done, lines.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ++write_errors_;
      last_error_ = absl::StrCat("cannot append to showback file ", options_.file, ": ",
                                 n < 0 ? std::strerror(errno) : "wrote nothing");
      if (done > 0) torn_ = true;
      return;
    }
    done += static_cast<size_t>(n);
  }
  torn_ = false;
  lines_written_ += static_cast<uint64_t>(std::count(lines.begin(), lines.end(), '\n'));
  if (lines.front() == '\n') --lines_written_;  // the separator after a torn fragment
}

}  // namespace geogate::accounting
