#include "server/named_files.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace geogate::server {
namespace {

/// `status` placed at `pos`: added to `errors` when given, and returned with
/// its message as "file:line:col: message".
absl::Status Report(const absl::Status& status, config::SourcePos pos, const std::string& file,
                    std::vector<config::ConfigError>* errors) {
  config::ConfigError e{file, pos.line, pos.column, std::string(status.message())};
  absl::Status positioned(status.code(), e.ToString());
  if (errors != nullptr) errors->push_back(std::move(e));
  return positioned;
}

absl::StatusOr<std::shared_ptr<const routing::MmdbGeoResolver>> Geo(
    const config::Snapshot& snap, const std::string& file,
    std::vector<config::ConfigError>* errors) {
  if (snap.geo.database.empty()) return std::shared_ptr<const routing::MmdbGeoResolver>();
  auto geo = routing::MmdbGeoResolver::Open(snap.geo.database, snap.geo);
  if (!geo.ok()) return Report(geo.status(), snap.geo.database_at, file, errors);
  return geo;
}

absl::StatusOr<proxy::SslContextPtr> ListenerTls(
    const config::TlsFiles& files, const std::string& file,
    std::vector<config::ConfigError>* errors,
    std::shared_ptr<proxy::TicketKeys> tickets = nullptr) {
  auto ctx = proxy::MakeServerContext(files, std::move(tickets));
  if (ctx.ok()) return ctx;
  // A key that does not load or does not match is the key's line; anything
  // else the certificate's. The message names the file either way.
  bool key = absl::StrContains(ctx.status().message(), "private key");
  return Report(ctx.status(), key ? files.key_at : files.cert_at, file, errors);
}

absl::StatusOr<std::vector<proxy::TicketKey>> Tickets(const config::TlsFiles& files,
                                                      const std::string& file,
                                                      std::vector<config::ConfigError>* errors) {
  if (files.ticket_keys.empty()) return std::vector<proxy::TicketKey>();
  auto keys = proxy::ReadTicketKeyFile(files.ticket_keys);
  if (keys.ok()) return keys;
  return Report(keys.status(), files.ticket_keys_at, file, errors);
}

absl::StatusOr<proxy::SslContextPtr> BackendTls(const config::Backend& b, const std::string& file,
                                                std::vector<config::ConfigError>* errors) {
  auto ctx = proxy::MakeClientContext(b.ca_file, b.tls_verify);
  if (ctx.ok()) return ctx;
  return Report(absl::Status(ctx.status().code(),
                             absl::StrCat("backend '", b.name, "': ", ctx.status().message())),
                b.tls_at, file, errors);
}

absl::StatusOr<proxy::SslContextPtr> CollectorTls(const config::Tracing& t, const std::string& file,
                                                  std::vector<config::ConfigError>* errors) {
  if (!t.enabled || !t.collector_tls) return proxy::SslContextPtr();
  auto ctx = proxy::MakeClientContext(t.ca_file, /*verify=*/true);
  if (ctx.ok()) return ctx;
  return Report(absl::Status(ctx.status().code(),
                             absl::StrCat("[tracing] collector: ", ctx.status().message())),
                t.tls_at, file, errors);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const routing::MmdbGeoResolver>> OpenGeoDatabase(
    const config::Snapshot& snap, const std::string& config_file) {
  return Geo(snap, config_file, nullptr);
}

absl::StatusOr<proxy::SslContextPtr> OpenListenerTls(const config::TlsFiles& files,
                                                     const std::string& config_file,
                                                     std::shared_ptr<proxy::TicketKeys> tickets) {
  return ListenerTls(files, config_file, nullptr, std::move(tickets));
}

absl::StatusOr<std::vector<proxy::TicketKey>> OpenTicketKeys(const config::TlsFiles& files,
                                                             const std::string& config_file) {
  return Tickets(files, config_file, nullptr);
}

absl::StatusOr<proxy::SslContextPtr> OpenBackendTls(const config::Backend& backend,
                                                    const std::string& config_file) {
  return BackendTls(backend, config_file, nullptr);
}

absl::StatusOr<proxy::SslContextPtr> OpenCollectorTls(const config::Tracing& tracing,
                                                      const std::string& config_file) {
  return CollectorTls(tracing, config_file, nullptr);
}

std::vector<config::ConfigError> CheckNamedFiles(const config::Snapshot& snap,
                                                 const std::string& config_file) {
  std::vector<config::ConfigError> errors;
  (void)Geo(snap, config_file, &errors);
  for (const config::Listener& l : snap.gateway.listeners)
    if (l.tls) {
      (void)ListenerTls(*l.tls, config_file, &errors);
      (void)Tickets(*l.tls, config_file, &errors);
    }
  for (const config::Backend& b : snap.backends)
    if (b.tls) (void)BackendTls(b, config_file, &errors);
  (void)CollectorTls(snap.tracing, config_file, &errors);
  return errors;
}

}  // namespace geogate::server
