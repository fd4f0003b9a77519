// What the in-memory tests of proxy/ share: a configuration and runtime
// without sockets, and a client that reads what the gateway sends it.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/_experimental/test/stream.hpp>

#include "config/loader.h"
#include "health/backend_state.h"
#include "proxy/runtime.h"

namespace geogate::proxy::testing {

namespace net = boost::asio;

// The config text of TwoBackends.
inline std::string TwoBackendsText() {
  return R"([gateway]
edge = "e"
[[gateway.listeners]]
address = "127.0.0.1:0"
[geo]
unknown = "any"
[[regions]]
name = "r0"
jurisdiction = "EU"
location = { lat = 1.0, lon = 1.0 }
[[backends]]
name = "b0"
region = "r0"
url = "http://127.0.0.1:1000"
models = ["m"]
[[backends]]
name = "b1"
region = "r0"
url = "http://127.0.0.1:1001"
models = ["m"]
[[residency]]
name = "any"
allow_regions = ["r0"]
)";
}

inline config::SnapshotConstPtr LoadConfigText(const std::string& text) {
  auto r = config::LoadString(text, "call.toml", "/tmp",
                              [](const std::string&) { return std::optional<std::string>(); });
  INFO((r.errors.empty() ? std::string() : r.errors.front().ToString()));
  REQUIRE(r.ok());
  return r.snapshot;
}

// Two backends of one model in one region, both allowed to every client.
inline config::SnapshotConstPtr TwoBackends(std::string_view extra = {}) {
  std::string text = TwoBackendsText();
  text += extra;
  return LoadConfigText(text);
}

inline RuntimeConstPtr MakeRuntime(config::SnapshotConstPtr snap) {
  auto rt = std::make_shared<Runtime>();
  for (const config::Backend& b : snap->backends) {
    auto state = std::make_shared<health::BackendState>(b.name);
    state->state = health::HealthState::kHealthy;
    rt->backends.push_back(std::move(state));
    rt->backend_tls.push_back(nullptr);
  }
  rt->config = std::move(snap);
  rt->generation = 1;
  return rt;
}

// The client's end of a connection: keeps one read pending and collects
// what arrives, until the gateway closes its end.
class ClientReader {
 public:
  explicit ClientReader(boost::beast::test::stream& s) : s_(s) {}
  /// Issues the next read (call once; it re-arms itself).
  void Pump() {
    if (pending_ || closed_) return;
    pending_ = true;
    s_.async_read_some(net::buffer(buf_), [this](boost::system::error_code ec, size_t n) {
      pending_ = false;
      got_.append(buf_, n);
      if (ec) {
        closed_ = true;
        return;
      }
      Pump();
    });
  }
  const std::string& got() const { return got_; }
  /// The gateway closed (or shut down sending on) the connection.
  bool closed() const { return closed_; }

 private:
  boost::beast::test::stream& s_;
  std::string got_;
  bool pending_ = false;
  bool closed_ = false;
  char buf_[4096];
};

}  // namespace geogate::proxy::testing
