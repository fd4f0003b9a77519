// The production ProbeClient (the only one in health/ that touches the
// network): HTTP/1.1 GET of the health path over a keep-alive connection that
// is reused between probes, plain or TLS, on the health thread's io_context.
//
//  - Target: backend.base_path (the backend's root: the URL's path without a
//    final /v1) + health.path; Host header from the URL.
//  - TLS (https backends): SNI (for host names), certificate chain and host
//    name verification against the system store or backend.ca_file;
//    backend.tls_verify = false turns verification off.
//  - One deadline (health.timeout) covers resolve, connect, TLS handshake,
//    request and response.
//  - Names: an IP literal needs no lookup. A host name is looked up on a
//    thread of its own (common::BoundedResolver), one lookup per backend at
//    a time: every backend's probes share the health thread, and a name
//    server that stalls holds only the probes of the names it serves
//    (kConnectTimeout), never another backend's. A reused connection the server has closed in the
//    meantime is reopened once within the same deadline.
//  - RTT: the request on an established connection; a probe that had to
//    connect reports the total.
//  - Failure reasons: kConnectRefused (refused/unreachable, at once),
//    kConnectTimeout, kProbeTimeout, kBadStatus (non-2xx), kTlsError,
//    kReset, kProtocolError.
//  - Load: health.load_report "auto" reads a JSON probe body; a path (e.g.
//    "/metrics") is fetched after each good probe on the same connection and
//    scanned for vLLM gauges (best effort within the same deadline: if it
//    cannot finish, the probe is still good, without load); "off" disables.
//  - Bodies are capped: 64 KiB for the health body, 4 MiB for the metrics
//    body, which is scanned as a stream and never held whole.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/detached_lookup.h"
#include "config/snapshot.h"
#include "health/probe_client.h"

namespace boost::asio {
class io_context;
}

namespace geogate::health {

class HttpProbeClient final : public ProbeClient {
 public:
  struct Options {
    std::string host;  // name or IP literal (brackets optional for IPv6)
    uint16_t port = 80;
    bool tls = false;
    std::string health_target = "/health";  // root (base_path) + health.path
    std::string load_target;                // root + load_report path; empty = none
    bool json_load = true;                  // load_report == "auto"
    Millis timeout{200};
    std::string ca_file;  // empty = system store
    bool tls_verify = true;
    common::LookupFn lookup;  // a host name's lookup; empty = the system resolver

    static Options From(const config::Backend& backend, const config::Health& health);
  };

  HttpProbeClient(boost::asio::io_context& io, Options options);
  ~HttpProbeClient() override;

  // health::ProbeClient
  void probe(Callback cb) override;
  void cancel() override;
  void close() override;
  FailureReason TimeoutReason() const override;

  /// TCP connections opened so far: keep-alive reuse shows as 1 for many probes.
  uint64_t connections_opened() const;
  const Options& options() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

class HttpProbeClientFactory final : public ProbeClientFactory {
 public:
  explicit HttpProbeClientFactory(boost::asio::io_context& io) : io_(io) {}

  // health::ProbeClientFactory
  ProbeClientPtr create(const config::Backend& backend, const config::Health& health) override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace geogate::health
