// The immutable configuration snapshot: geogate.toml (DESIGN.md §5) parsed and
// validated once, then shared read-only by every thread through
// std::shared_ptr<const Snapshot>. Nothing in here changes after load; a reload
// builds a new Snapshot and publishes it atomically.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "config/region_set.h"

namespace geogate::config {

using Millis = std::chrono::milliseconds;

struct GeoPoint {
  double lat = 0;
  double lon = 0;
};

/// An address/prefix pair from `trusted_proxies`. IPv4 is stored as an
/// IPv4-mapped IPv6 address (::ffff:a.b.c.d, prefix + 96) so one comparison
/// covers both families.
struct Cidr {
  std::array<uint8_t, 16> addr{};
  uint8_t prefix_len = 0;  // 0..128, over the 16-byte form

  /// True when `ip16` (16-byte, v4 mapped) lies inside this prefix.
  bool contains(const std::array<uint8_t, 16>& ip16) const;
  bool operator==(const Cidr&) const = default;
};

/// A 1-based line/column in the config file ({0, 0}: not from the file).
/// Kept for the values that name files: start-up, reload and --check open
/// those files after the load and report what is wrong with one at the key
/// that names it, as "file:line:col: message" (DESIGN.md §8).
struct SourcePos {
  uint32_t line = 0;
  uint32_t column = 0;
};

struct TlsFiles {
  std::string cert;         // absolute path, PEM chain
  std::string key;          // absolute path, PEM private key
  std::string ticket_keys;  // absolute path, session-ticket keys; empty = generated
  SourcePos cert_at;
  SourcePos key_at;
  SourcePos ticket_keys_at;
};

/// CORS for browser clients on one listener (off when no origin is allowed).
/// The gateway answers preflights itself and adds Access-Control-* to every
/// response for an allowed origin; a backend's own Access-Control-* fields
/// never reach the client.
struct Cors {
  bool any_origin = false;                   // cors_allowed_origins = ["*"]
  std::vector<std::string> allowed_origins;  // serialised as a browser sends them
  std::string allowed_headers;               // Access-Control-Allow-Headers, ", "-joined
  uint32_t max_age_s = 600;                  // Access-Control-Max-Age
  bool enabled() const { return any_origin || !allowed_origins.empty(); }
};

struct Listener {
  std::string address;  // as written, "host:port" or "[v6]:port"
  std::string host;     // numeric address, e.g. "0.0.0.0", "::"
  uint16_t port = 0;    // 0 = pick one (tests); all workers share it
  std::optional<TlsFiles> tls;
  bool proxy_protocol = false;
  Cors cors;
};

struct Admin {
  std::string address = "127.0.0.1:9901";
  std::string host = "127.0.0.1";
  uint16_t port = 9901;
};

struct Limits {
  uint32_t max_header_bytes = 16384;
  uint64_t max_body_bytes = 4194304;
  Millis header_timeout{10000};  // total deadline for the request head
  Millis idle_timeout{60000};    // keep-alive idle between requests
  Millis park_after{100};        // idle this long, a plain connection parks; 0 = never
  Millis body_timeout{30000};    // total deadline for the request body, from the end of its head
  uint32_t max_connections = 10000;     // per process; 0 = unlimited
  uint32_t max_connections_per_ip = 0;  // per client address, per process; 0 = unlimited
};

/// The most attempts one request may make (upstream.max_attempts).
inline constexpr uint32_t kMaxAttempts = 10;

struct Upstream {
  Millis connect_timeout{500};
  Millis first_token_timeout{30000};  // to the first response body byte
  Millis stream_idle_timeout{60000};  // longest gap between body bytes
  uint32_t max_attempts = 3;          // counts the first attempt
  Millis retry_deadline{10000};       // all attempts of one request
  Millis drain_delay{2000};
  Millis drain_timeout{30000};
  uint32_t retry_budget_percent = 20;  // retries <= this share of active requests
  uint32_t retry_budget_min = 3;       // ... but always at least this many
  // Idle keep-alive conns kept per backend per worker; unset: the
  // backend's capacity, the most requests it is given at once.
  std::optional<uint32_t> pool_max_idle;
  Millis pool_idle_timeout{30000};  // an idle pooled conn older than this is closed
  uint32_t relay_batch = 16;        // relays a worker runs between polls under load
};

struct Gateway {
  std::string edge = "edge";
  GeoPoint location;
  uint32_t workers = 0;  // as written; 0 = one per core
  std::vector<Listener> listeners;
  Admin admin;
  Limits limits;
  Upstream upstream;
  std::string access_log = "-";   // "-" stdout, "" off, else a file path (absolute)
  bool residency_header = false;  // add x-geogate-residency-rule to responses
};

enum class ClientIpSource : uint8_t { kPeer, kXForwardedFor, kProxyProtocol };

struct Geo {
  std::string database;  // absolute path; empty = no database (every client unknown)
  SourcePos database_at;
  ClientIpSource client_ip = ClientIpSource::kPeer;
  std::vector<Cidr> trusted_proxies;
  /// Rule index applied to clients the database cannot place; nullopt = deny.
  std::optional<size_t> unknown_rule;
  std::string unknown = "deny";  // as written
  std::string country_field = "country.iso_code";
  std::string continent_field = "continent.code";
  std::string subdivision_field = "subdivisions.0.iso_code";
  std::string latitude_field = "location.latitude";
  std::string longitude_field = "location.longitude";
};

struct Health {
  std::string path = "/health";
  Millis interval{100};
  Millis timeout{200};
  uint32_t unhealthy_threshold = 2;
  uint32_t healthy_threshold = 2;
  Millis changing_interval{50};  // probe interval while a backend is changing state
  uint32_t jitter_percent = 10;  // +- share of the interval added to each wait
  uint32_t outlier_consecutive_failures = 3;
  Millis outlier_base_ejection{5000};
  Millis outlier_max_ejection{300000};
  uint32_t max_ejection_percent = 50;  // of a pool (region x model); never crosses residency
  std::string load_report =
      "auto";  // "auto" (JSON body of the probe) | "off" | a path like "/metrics"
};

// Defaults chosen with bench/routing (bench/RESULTS.md "## Routing"): with
// them reserved capacity is over 70 % full before on-demand takes load, at a
// p99 TTFT within 10 % of an oracle's.
struct Routing {
  Millis latency_slack{80};
  Millis tie{2};
  Millis prior_ttft{50};
  Millis queue_timeout{0};
  double ewma_alpha = 0.05;    // weight of a new sample in RTT/TTFT EWMAs
  Millis sample_stale{10000};  // a TTFT EWMA older than this decays back to the prior
};

/// [showback]: where closed per-minute usage buckets are kept (docs/showback.md).
struct Showback {
  std::string file;             // absolute path of the JSON-lines file; "" = memory only
  uint32_t window_hours = 168;  // how long buckets stay queryable in memory (1..8760)
};

/// [capacity]: the utilisation and scaling signals (docs/showback.md).
struct Capacity {
  double target_utilization = 0.70;  // 0 < x <= 1; what desired backend counts aim for
  Millis sample_interval{1000};      // how often the server samples backend in-flight counts
};

/// [tracing]: OpenTelemetry spans over OTLP/HTTP JSON (docs/tracing.md). Off by default.
struct Tracing {
  bool enabled = false;
  std::string collector_url;    // as written; http:// or https://
  bool collector_tls = false;   // https://: TLS, the certificate verified, SNI set
  std::string collector_host;   // registered name or IP literal, IPv6 without brackets
  uint16_t collector_port = 0;  // explicit, else 80 (443 for https)
  std::string collector_path;   // the URL's path, "/v1/traces" when it has none
  std::string ca_file;          // CA bundle for an https collector; empty = system store
  SourcePos tls_at;             // of ca_file, else of collector_url (TLS context problems)
  double sampling_ratio = 1.0;  // 0..1 for traces the gateway starts; parent-based otherwise
  std::string service_name = "geogate";
  uint32_t batch_size = 512;     // spans per export request (1..10000)
  Millis batch_interval{1000};   // the longest a finished span waits for its batch
  uint32_t queue_limit = 8192;   // spans waiting for export; beyond it new spans are dropped
  Millis export_timeout{2000};   // one export request, connect to response
  Millis connect_timeout{1000};  // name resolution, TCP connect and TLS handshake (10..60000)
  Millis flush_timeout{2000};    // at shutdown, for what is still queued; 0 = drop it (0..60000)
};

struct Region {
  std::string name;
  std::string jurisdiction;
  GeoPoint location;
};

enum class Tier : uint8_t { kReserved = 0, kOnDemand = 1, kSpot = 2 };
const char* TierName(Tier t);

struct Backend {
  std::string name;
  std::string region;  // as written
  size_t region_index = 0;
  std::string url;   // as written
  bool tls = false;  // https://
  std::string host;  // for connect, Host and SNI; IPv6 literals without brackets
  uint16_t port = 0;
  // The backend's root, put before every path sent to it (the client's
  // /v1/..., health.path, health.load_report): the URL's path without
  // trailing '/' and without a final "/v1" (an OpenAI base URL's). Usually "".
  std::string base_path;
  std::vector<std::string> models;  // canonical names this backend serves
  std::string gpu;
  std::string provider;
  Tier tier = Tier::kOnDemand;
  uint32_t capacity = 64;
  double cost_per_hour = 0;
  double weight = 1;
  std::optional<double> vram_gb;
  std::string api_key_env;  // as written
  std::string api_key;      // resolved from the environment at load time (secret)
  std::string ca_file;      // optional CA bundle for https backends; empty = system store
  bool tls_verify = true;
  SourcePos tls_at;  // of ca_file, else of url: where a client TLS context problem is reported
  /// Identity for state that survives reloads: a backend that keeps its name
  /// but changes its URL is a new backend with fresh health (DESIGN.md §7).
  std::string state_key() const {
    std::string key;
    AppendStateKey(key);
    return key;
  }
  /// The same key appended to `out`, for hot paths that reuse a buffer.
  void AppendStateKey(std::string& out) const { out.append(name).append(1, '\n').append(url); }
};

struct Model {
  std::string name;
  std::vector<std::string> aliases;
  std::vector<std::string> gpu_preference;  // most preferred first
  std::optional<double> min_vram_gb;
};

struct ResidencyRule {
  std::string name;
  std::vector<std::string> countries;   // ISO 3166-1 alpha-2, upper case
  std::vector<std::string> continents;  // AF AN AS EU NA OC SA
  std::vector<std::string> allow_regions;
  std::vector<std::string> allow_jurisdictions;
  RegionSet allowed;  // resolved: regions named or in a named jurisdiction
};

struct Tenant {
  std::string name;
  std::vector<std::array<uint8_t, 32>> api_key_sha256;
  std::string residency;                 // as written; empty = not forced
  std::optional<size_t> residency_rule;  // forced rule index
  bool allow_spot = false;
  double requests_per_second = 0;  // 0 = unlimited
  double burst = 0;                // token-bucket depth; 0 = max(1, requests_per_second)
  uint32_t max_concurrent = 0;     // 0 = unlimited
  std::optional<double> monthly_budget;
};

/// Everything in one immutable value plus the lookup tables derived from it.
struct Snapshot {
  Gateway gateway;
  Geo geo;
  Health health;
  Routing routing;
  Showback showback;
  Capacity capacity;
  Tracing tracing;
  std::vector<Region> regions;
  std::vector<Backend> backends;
  std::vector<Model> models;  // one entry per canonical model (declared or implied by a backend)
  std::vector<ResidencyRule> residency;
  std::vector<Tenant> tenants;

  // --- derived, built by the loader ---
  absl::flat_hash_map<std::string, size_t> region_by_name;
  absl::flat_hash_map<std::string, size_t> backend_by_name;
  absl::flat_hash_map<std::string, size_t> rule_by_name;
  /// Canonical name or alias -> index into `models`.
  absl::flat_hash_map<std::string, size_t> model_by_name;
  /// Model index -> indices of backends that serve it.
  std::vector<std::vector<size_t>> backends_by_model;
  /// Jurisdiction name -> regions in it.
  absl::flat_hash_map<std::string, RegionSet> regions_by_jurisdiction;
  /// Raw 32-byte SHA-256 of a key (as a std::string) -> tenant index.
  absl::flat_hash_map<std::string, size_t> tenant_by_key_hash;

  // --- provenance ---
  std::string source_path;  // absolute path of the file loaded
  std::string hash;         // hex SHA-256 of the file's bytes
  uint64_t generation = 0;  // set by the publisher
  absl::Time loaded_at;

  /// Index of a model by canonical name or alias, or nullopt.
  std::optional<size_t> FindModel(std::string_view name) const;
  /// The set of every region.
  RegionSet AllRegions() const { return RegionSet::All(regions.size()); }
};

using SnapshotConstPtr = std::shared_ptr<const Snapshot>;

}  // namespace geogate::config
