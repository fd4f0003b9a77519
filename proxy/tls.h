// OpenSSL contexts: the server side of TLS listeners (certificate chain and
// key from the config, TLS 1.2+, ALPN http/1.1, session tickets) and the client side for https
// backends (system trust store or a CA file, verification on by default).
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "absl/status/statusor.h"
#include "config/snapshot.h"
#include "proxy/tls_tickets.h"

namespace geogate::proxy {

using SslContextPtr = std::shared_ptr<boost::asio::ssl::context>;

/// Loads cert chain and key; fails with a message naming the file. Session
/// tickets use `tickets` when given (the listener's keys, kept across reloads).
absl::StatusOr<SslContextPtr> MakeServerContext(const config::TlsFiles& files,
                                                std::shared_ptr<TicketKeys> tickets = nullptr);

/// A client context for backends. `ca_file` empty = system default paths.
absl::StatusOr<SslContextPtr> MakeClientContext(const std::string& ca_file, bool verify);

/// "notAfter" of the certificate chain's leaf, seconds since 1970 (0 when
/// unknown): for the certificate-expiry metric.
int64_t CertificateNotAfter(const boost::asio::ssl::context& ctx);

}  // namespace geogate::proxy
