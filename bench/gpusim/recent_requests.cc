#include "bench/gpusim/recent_requests.h"

#include <boost/json/object.hpp>

namespace gpusim {

void RecentRequests::add(Head head) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mu_);
  if (heads_.size() >= capacity_) heads_.pop_front();
  heads_.push_back(std::move(head));
}

boost::json::array RecentRequests::snapshot() const {
  boost::json::array out;
  std::lock_guard lock(mu_);
  for (const Head& h : heads_) {
    boost::json::array headers;
    for (const auto& [name, value] : h.headers)
      headers.push_back(boost::json::array{boost::json::string(name), boost::json::string(value)});
    out.push_back(boost::json::object{
        {"method", h.method}, {"target", h.target}, {"headers", std::move(headers)}});
  }
  return out;
}

void RecentRequests::clear() {
  std::lock_guard lock(mu_);
  heads_.clear();
}

}  // namespace gpusim
