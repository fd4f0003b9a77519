// TLS session-ticket keys for client listeners. One TicketKeys per listener
// lives as long as the process and is installed on every server context that
// listener gets, so a reload (new certificate, new SSL_CTX) does not cost
// every reconnecting client a full handshake, and every worker accepts every
// other worker's tickets.
//
// Keys are either generated (random, rotated every rotation period, the older
// ones kept for decryption for as long as a ticket can live) or read from a
// file that an operator shares across the edges of a fleet, so that a client
// whose anycast route moves to another edge still resumes. The file is
// HAProxy's format: one key per line, base64 of 80 bytes (16-byte name,
// 32-byte AES-256 key, 32-byte HMAC-SHA256 key); the first key encrypts new
// tickets, every key decrypts. Blank lines and lines starting with # are
// skipped.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/ssl.h>

#include "absl/status/statusor.h"
#include "health/time_source.h"

namespace geogate::proxy {

struct TicketKey {
  std::array<unsigned char, 16> name{};
  std::array<unsigned char, 32> aes{};
  std::array<unsigned char, 32> hmac{};
};

/// Parses a key file's text. Errors name the line ("line 3: ...").
absl::StatusOr<std::vector<TicketKey>> ParseTicketKeys(std::string_view text);

/// Reads and parses a key file; errors name the file.
absl::StatusOr<std::vector<TicketKey>> ReadTicketKeyFile(const std::string& path);

class TicketKeys {
 public:
  /// How often generated keys rotate, and how long a ticket may be used
  /// (the session timeout set on every context): a generated key decrypts
  /// for kLifetime after it stopped encrypting.
  static constexpr std::chrono::seconds kRotation{3600};
  static constexpr std::chrono::seconds kLifetime{7200};

  explicit TicketKeys(const health::TimeSource& time);

  /// Uses these keys (from a file) from now on: the first encrypts.
  /// An empty list goes back to generated keys.
  void UseKeys(std::vector<TicketKey> keys);

  /// Sets the ticket callback and the session timeout on `ctx`. The context
  /// keeps this object alive.
  static void Install(SSL_CTX* ctx, std::shared_ptr<TicketKeys> keys);

  /// For tests and the admin view: how many keys decrypt now, and whether
  /// they came from a file.
  size_t size() const;
  bool from_file() const;

  /// The ticket callback's two halves. `name` is 16 bytes.
  /// @return the key that encrypts now (rotating generated keys when due).
  TicketKey EncryptionKey();
  /// @return 0 when no key has this name, 1 when it is the encrypting key,
  /// 2 when it is an older one (the ticket is renewed); `out` gets the key.
  int DecryptionKey(const unsigned char* name, TicketKey& out);

 private:
  void RotateLocked(health::MonotonicTime now);

  const health::TimeSource& time_;
  mutable std::mutex mu_;
  std::vector<TicketKey> keys_;                 // [0] encrypts
  std::vector<health::MonotonicTime> created_;  // of each generated key
  bool from_file_ = false;
};

}  // namespace geogate::proxy
