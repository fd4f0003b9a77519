// A set of region indices: the unit in which residency is decided. Small,
// copyable and cheap to intersect, because every request computes one.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace geogate::config {

class RegionSet {
 public:
  RegionSet() = default;
  /// An empty set able to hold `n` regions.
  explicit RegionSet(size_t n) : words_((n + 63) / 64, 0), size_(n) {}

  static RegionSet All(size_t n) {
    RegionSet s(n);
    for (size_t i = 0; i < n; ++i)
      s.insert(i);
    return s;
  }

  void insert(size_t i) {
    if (i >= size_) resize(i + 1);
    words_[i / 64] |= uint64_t{1} << (i % 64);
  }
  bool contains(size_t i) const { return i < size_ && (words_[i / 64] >> (i % 64) & 1) != 0; }
  bool empty() const {
    for (uint64_t w : words_)
      if (w != 0) return false;
    return true;
  }
  size_t count() const {
    size_t c = 0;
    for (uint64_t w : words_)
      c += static_cast<size_t>(std::popcount(w));
    return c;
  }
  /// Number of regions this set can describe (the snapshot's region count).
  size_t universe() const { return size_; }

  RegionSet intersect(const RegionSet& o) const {
    RegionSet r(std::max(size_, o.size_));
    for (size_t i = 0; i < r.words_.size(); ++i) {
      uint64_t a = i < words_.size() ? words_[i] : 0;
      uint64_t b = i < o.words_.size() ? o.words_[i] : 0;
      r.words_[i] = a & b;
    }
    return r;
  }
  void unite(const RegionSet& o) {
    if (o.size_ > size_) resize(o.size_);
    for (size_t i = 0; i < o.words_.size(); ++i)
      words_[i] |= o.words_[i];
  }
  std::vector<size_t> members() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < size_; ++i)
      if (contains(i)) out.push_back(i);
    return out;
  }
  bool operator==(const RegionSet& o) const {
    size_t n = std::max(words_.size(), o.words_.size());
    for (size_t i = 0; i < n; ++i) {
      uint64_t a = i < words_.size() ? words_[i] : 0;
      uint64_t b = i < o.words_.size() ? o.words_[i] : 0;
      if (a != b) return false;
    }
    return true;
  }

 private:
  void resize(size_t n) {
    words_.resize((n + 63) / 64, 0);
    size_ = n;
  }
  absl::InlinedVector<uint64_t, 1> words_;
  size_t size_ = 0;
};

}  // namespace geogate::config
