#include "common/detached_lookup.h"

#include <system_error>
#include <thread>

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace geogate::common {

namespace net = boost::asio;
using boost::system::error_code;

error_code SystemLookup(const std::string& host, uint16_t port, Endpoints& out) {
  net::io_context ioc(1);
  net::ip::tcp::resolver resolver(ioc);
  error_code ec;
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return ec;
  for (const auto& r : results)
    out.push_back(r.endpoint());
  if (out.empty()) return net::error::host_not_found;
  return {};
}

std::shared_ptr<DetachedLookup> DetachedLookup::Start(net::any_io_executor executor,
                                                      const LookupFn& lookup, std::string host,
                                                      uint16_t port, Done done, error_code& ec) {
  auto self = std::make_shared<DetachedLookup>(std::move(executor), std::move(done));
  try {
    std::thread([self, lookup, host = std::move(host), port] {
      Endpoints endpoints;
      error_code lookup_ec = lookup(host, port, endpoints);
      self->Finish(lookup_ec, std::move(endpoints));
    }).detach();
  } catch (const std::system_error& e) {
    ec = e.code();
    return nullptr;
  }
  return self;
}

void DetachedLookup::Finish(error_code ec, Endpoints endpoints) {
  std::lock_guard lock(mu_);
  finished_ = true;
  // Posted under the lock, so Abandon() (which takes it before the
  // io_context can go) is either before this or after it.
  if (abandoned_) return;
  net::post(executor_, [self = shared_from_this(), ec, endpoints = std::move(endpoints)]() mutable {
    {
      std::lock_guard lock(self->mu_);
      if (self->abandoned_) return;  // abandoned after the post
    }
    Done done = std::move(self->done_);
    if (done) done(ec, std::move(endpoints));
  });
}

void DetachedLookup::Abandon() {
  std::lock_guard lock(mu_);
  abandoned_ = true;
  done_ = nullptr;  // what it holds goes now, on the executor's thread
}

bool DetachedLookup::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

}  // namespace geogate::common
