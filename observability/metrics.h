// Metrics without locks on the request path: every worker owns a
// WorkerMetrics that only its own thread touches. A scrape posts a copy
// request to each worker and merges the copies (see Server::CollectMetrics).
// Label values come from the config (backend, region, model, tenant names)
// or from small fixed vocabularies (status codes, reasons), never from raw
// client input, so cardinality stays bounded.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "common/strings.h"

namespace geogate::observability {

template <size_t N>
using Labels = std::array<std::string, N>;
template <size_t N>
using LabelView = std::array<std::string_view, N>;

template <size_t N>
struct LabelHash {
  using is_transparent = void;
  size_t operator()(const LabelView<N>& v) const { return HashLabels(v); }
  size_t operator()(const Labels<N>& v) const { return (*this)(View(v)); }
  static LabelView<N> View(const Labels<N>& v) {
    LabelView<N> out;
    for (size_t i = 0; i < N; ++i)
      out[i] = v[i];
    return out;
  }
};

template <size_t N>
struct LabelEq {
  using is_transparent = void;
  bool operator()(const LabelView<N>& a, const LabelView<N>& b) const { return a == b; }
  bool operator()(const Labels<N>& a, const LabelView<N>& b) const {
    return LabelHash<N>::View(a) == b;
  }
  bool operator()(const LabelView<N>& a, const Labels<N>& b) const {
    return a == LabelHash<N>::View(b);
  }
  bool operator()(const Labels<N>& a, const Labels<N>& b) const { return a == b; }
};

template <size_t N, class V>
using LabelMap = absl::flat_hash_map<Labels<N>, V, LabelHash<N>, LabelEq<N>>;

/// A metric family's series by label values (and a showback minute's
/// buckets by key, accounting/showback_ledger.h), with the last two
/// looked up tried before any hashing: a worker counts most requests under
/// the labels of the one before (its backend, model, tenant and code), or
/// under two that alternate (the prompt's and the completion's tokens), and
/// hashing the label strings and probing was most of a look-up (callgrind,
/// small POST: about 2 k of its 38 k instructions over its eight
/// look-ups). They are compared by content, not by the views' addresses:
/// a reload frees the label strings of the old config, and a new one may
/// take the same address with other text. An insert may move entries (a
/// rehash), so it forgets both; a copy starts with none.
template <size_t N, class V>
class SeriesMap {
 public:
  SeriesMap() = default;
  SeriesMap(const SeriesMap& o) : map_(o.map_) {}
  SeriesMap& operator=(const SeriesMap& o) {
    map_ = o.map_;
    Forget();
    return *this;
  }
  SeriesMap(SeriesMap&& o) noexcept : map_(std::move(o.map_)) { o.Forget(); }
  SeriesMap& operator=(SeriesMap&& o) noexcept {
    map_ = std::move(o.map_);
    Forget();
    o.Forget();
    return *this;
  }

  /// The value under `labels`: one of the last two's if the labels are
  /// theirs, else looked up by the views, and added as `make()` with the
  /// label strings copied only when it is not there yet.
  template <class Make>
  V& FindOrAdd(const LabelView<N>& labels, Make make) {
    for (Entry* e : last_)
      if (e != nullptr && SameLabels(e->first, labels)) return e->second;
    auto it = map_.find(labels);
    if (it == map_.end()) {
      Labels<N> key;
      for (size_t i = 0; i < N; ++i)
        key[i] = std::string(labels[i]);
      it = map_.emplace(std::move(key), make()).first;
      Forget();
    }
    last_[older_] = &*it;
    older_ ^= 1;
    return it->second;
  }
  const LabelMap<N, V>& map() const { return map_; }

 private:
  static bool SameLabels(const Labels<N>& a, const LabelView<N>& b) {
    for (size_t i = 0; i < N; ++i)
      if (a[i].size() != b[i].size()) return false;
    // An empty view may have no data at all, which memcmp must not see.
    for (size_t i = 0; i < N; ++i)
      if (!b[i].empty() && std::memcmp(a[i].data(), b[i].data(), b[i].size()) != 0) return false;
    return true;
  }

  using Entry = typename LabelMap<N, V>::value_type;
  void Forget() { last_ = {nullptr, nullptr}; }

  LabelMap<N, V> map_;
  std::array<Entry*, 2> last_{};
  size_t older_ = 0;  // the one of last_ to replace next
};

template <size_t N>
class CounterVec {
 public:
  void Add(const LabelView<N>& labels, double v = 1) {
    values_.FindOrAdd(labels, [] { return 0.0; }) += v;
  }
  void MergeInto(CounterVec& out) const {
    for (const auto& [k, v] : values())
      out.Add(LabelHash<N>::View(k), v);
  }
  const LabelMap<N, double>& values() const { return values_.map(); }

 private:
  SeriesMap<N, double> values_;
};

struct HistogramData {
  std::vector<uint64_t> buckets;  // per bucket (not cumulative); last is +Inf
  double sum = 0;
  uint64_t count = 0;
};

/// Bucket upper bounds shared by the latency histograms, in seconds.
const std::vector<double>& LatencyBuckets();
/// Finer buckets for inter-token gaps, in seconds.
const std::vector<double>& TokenGapBuckets();

template <size_t N>
class HistogramVec {
 public:
  explicit HistogramVec(const std::vector<double>& bounds = LatencyBuckets()) : bounds_(&bounds) {}
  void Observe(const LabelView<N>& labels, double v) { Add(Series(labels), v); }
  /// Many values of one series, looked up once (a stream's token gaps).
  void ObserveAll(const LabelView<N>& labels, std::span<const double> vs) {
    if (vs.empty()) return;
    HistogramData& d = Series(labels);
    for (double v : vs)
      Add(d, v);
  }
  void MergeInto(HistogramVec& out) const {
    for (const auto& entry : values()) {
      // Not a structured binding: clang 14 (clang-tidy) lets no lambda capture one.
      const HistogramData& d = entry.second;
      bool added = false;
      HistogramData& o = out.values_.FindOrAdd(LabelHash<N>::View(entry.first), [&] {
        added = true;
        return d;
      });
      if (added) continue;
      for (size_t i = 0; i < d.buckets.size(); ++i)
        o.buckets[i] += d.buckets[i];
      o.sum += d.sum;
      o.count += d.count;
    }
  }
  const std::vector<double>& bounds() const { return *bounds_; }
  const LabelMap<N, HistogramData>& values() const { return values_.map(); }

 private:
  HistogramData& Series(const LabelView<N>& labels) {
    return values_.FindOrAdd(labels, [this] {
      HistogramData d;
      d.buckets.assign(bounds_->size() + 1, 0);
      return d;
    });
  }
  void Add(HistogramData& d, double v) const {
    size_t b = 0;
    while (b < bounds_->size() && v > (*bounds_)[b])
      ++b;
    d.buckets[b]++;
    d.sum += v;
    d.count++;
  }

  const std::vector<double>* bounds_;
  SeriesMap<N, HistogramData> values_;
};

/// Prometheus text exposition format 0.0.4.
class PromWriter {
 public:
  /// Starts a metric family (# HELP / # TYPE).
  void Family(std::string_view name, std::string_view type, std::string_view help);
  /// One sample. `labels` are name/value pairs.
  void Sample(std::string_view name,
              std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
              double value);
  template <size_t N>
  void Counter(std::string_view name, const std::array<const char*, N>& label_names,
               const CounterVec<N>& c) {
    for (const auto& [k, v] : c.values())
      SampleN(name, label_names.data(), k.data(), N, v);
  }
  template <size_t N>
  void Histogram(std::string_view name, const std::array<const char*, N>& label_names,
                 const HistogramVec<N>& h) {
    for (const auto& [k, d] : h.values())
      HistogramSamples(name, label_names.data(), k.data(), N, h.bounds(), d);
  }
  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void SampleN(std::string_view name, const char* const* names, const std::string* values, size_t n,
               double v, std::string_view extra_name = {}, std::string_view extra_value = {});
  void HistogramSamples(std::string_view name, const char* const* names, const std::string* values,
                        size_t n, const std::vector<double>& bounds, const HistogramData& d);
  std::string out_;
};

/// Formats a sample value the way Prometheus parses it (integers without a
/// fraction, +Inf/-Inf/NaN spelled out).
std::string FormatValue(double v);

}  // namespace geogate::observability
