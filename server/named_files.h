// The files a config snapshot names, opened the one way start-up, every
// reload and `geogate --check` share: the geo database, the listeners'
// certificates, keys and session-ticket keys, the https backends' and the
// collector's CA files. --check opens exactly what start-up opens
// (DESIGN.md §8) because both call these.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/loader.h"
#include "config/snapshot.h"
#include "proxy/tls.h"
#include "routing/mmdb_geo_resolver.h"

namespace geogate::server {

/// The geo database of [geo] with its field paths; null when none is named.
/// @return the resolver, or an error "file:line:col: message" at geo.database.
absl::StatusOr<std::shared_ptr<const routing::MmdbGeoResolver>> OpenGeoDatabase(
    const config::Snapshot& snap, const std::string& config_file);

/// The server context of a TLS listener: certificate chain, key, and that
/// they match; its session tickets use `tickets` (the listener's keys) when
/// given. @return an error at the cert (or key) value on failure.
absl::StatusOr<proxy::SslContextPtr> OpenListenerTls(
    const config::TlsFiles& files, const std::string& config_file,
    std::shared_ptr<proxy::TicketKeys> tickets = nullptr);

/// The session-ticket keys of a TLS listener's `ticket_keys` file; empty when
/// it names none. @return an error at the ticket_keys value on failure.
absl::StatusOr<std::vector<proxy::TicketKey>> OpenTicketKeys(const config::TlsFiles& files,
                                                             const std::string& config_file);

/// The client context of an https backend. @return an error at its ca_file
/// (or url) on failure.
absl::StatusOr<proxy::SslContextPtr> OpenBackendTls(const config::Backend& backend,
                                                    const std::string& config_file);

/// The client context of an https OTLP collector ([tracing]): null for
/// http:// or tracing off. @return an error at tracing.ca_file (or
/// collector_url) on failure.
absl::StatusOr<proxy::SslContextPtr> OpenCollectorTls(const config::Tracing& tracing,
                                                      const std::string& config_file);

/// Opens every file above and returns every problem, each at the key that
/// names the file: what `--check` adds to the loader's errors.
std::vector<config::ConfigError> CheckNamedFiles(const config::Snapshot& snap,
                                                 const std::string& config_file);

}  // namespace geogate::server
