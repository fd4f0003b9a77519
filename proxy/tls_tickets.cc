#include "proxy/tls_tickets.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace geogate::proxy {
namespace {

constexpr size_t kKeyBytes = 80;
TicketKey RandomKey() {
  TicketKey k;
  // RAND_bytes fails only when the process has no entropy source at all;
  // a key of zeros would then still be per-process but guessable, so abort.
  if (RAND_bytes(k.name.data(), k.name.size()) != 1 ||
      RAND_bytes(k.aes.data(), k.aes.size()) != 1 || RAND_bytes(k.hmac.data(), k.hmac.size()) != 1)
    std::abort();
  return k;
}

int ExIndex() {
  static const int index = SSL_CTX_get_ex_new_index(
      0, nullptr, nullptr, nullptr, [](void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
        delete static_cast<std::shared_ptr<TicketKeys>*>(ptr);
      });
  return index;
}

bool SetMacKey(EVP_MAC_CTX* mac, const TicketKey& k) {
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY,
                                        const_cast<unsigned char*>(k.hmac.data()), k.hmac.size()),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end()};
  return EVP_MAC_CTX_set_params(mac, params) == 1;
}

// OpenSSL's ticket callback: enc=1 fills name and IV and sets up the cipher
// and MAC for a new ticket; enc=0 looks the name up for a ticket received.
int TicketCallback(SSL* ssl, unsigned char* name, unsigned char* iv, EVP_CIPHER_CTX* cipher,
                   EVP_MAC_CTX* mac, int enc) {
  auto* holder = static_cast<std::shared_ptr<TicketKeys>*>(
      SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ExIndex()));
  if (holder == nullptr || !*holder) return -1;
  TicketKeys& keys = **holder;
  if (enc == 1) {
    TicketKey k = keys.EncryptionKey();
    if (RAND_bytes(iv, 16) != 1) return -1;
    std::memcpy(name, k.name.data(), k.name.size());
    if (EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, k.aes.data(), iv) != 1) return -1;
    return SetMacKey(mac, k) ? 1 : -1;
  }
  TicketKey k;
  int found = keys.DecryptionKey(name, k);
  if (found == 0) return 0;  // unknown key: full handshake, and a new ticket
  if (EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, k.aes.data(), iv) != 1) return -1;
  if (!SetMacKey(mac, k)) return -1;
  // 2 asks for a new ticket: always in TLS 1.3, whose clients use a ticket
  // once (without a new one, every other connection of theirs would be a
  // full handshake, as OpenSSL's own keys never let happen); in TLS 1.2
  // when a retired key decrypted it.
  return SSL_version(ssl) >= TLS1_3_VERSION ? 2 : found;
}

}  // namespace

absl::StatusOr<std::vector<TicketKey>> ParseTicketKeys(std::string_view text) {
  std::vector<TicketKey> keys;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::string raw;
    if (!absl::Base64Unescape(line, &raw))
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": not base64"));
    if (raw.size() != kKeyBytes)
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": a key is ", kKeyBytes,
                                                     " bytes (base64 of `openssl rand 80`), not ",
                                                     raw.size()));
    TicketKey k;
    std::memcpy(k.name.data(), raw.data(), 16);
    std::memcpy(k.aes.data(), raw.data() + 16, 32);
    std::memcpy(k.hmac.data(), raw.data() + 48, 32);
    for (const TicketKey& other : keys)
      if (other.name == k.name)
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_no, ": repeats the name of an earlier key"));
    keys.push_back(k);
  }
  if (keys.empty()) return absl::InvalidArgumentError("no key in the file");
  return keys;
}

absl::StatusOr<std::vector<TicketKey>> ReadTicketKeyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ticket key file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  auto keys = ParseTicketKeys(text.str());
  if (!keys.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("ticket key file ", path, ": ", keys.status().message()));
  return keys;
}

TicketKeys::TicketKeys(const health::TimeSource& time) : time_(time) {
  keys_.push_back(RandomKey());
  created_.push_back(time_.monotonic());
}

void TicketKeys::UseKeys(std::vector<TicketKey> keys) {
  std::lock_guard lock(mu_);
  if (!keys.empty()) {
    keys_ = std::move(keys);
    created_.clear();
    from_file_ = true;
    return;
  }
  if (!from_file_) return;  // generated keys stay as they are
  keys_.assign(1, RandomKey());
  created_.assign(1, time_.monotonic());
  from_file_ = false;
}

void TicketKeys::Install(SSL_CTX* ctx, std::shared_ptr<TicketKeys> keys) {
  SSL_CTX_set_ex_data(ctx, ExIndex(), new std::shared_ptr<TicketKeys>(std::move(keys)));
  SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, TicketCallback);
  SSL_CTX_set_timeout(ctx, static_cast<long>(kLifetime.count()));
}

size_t TicketKeys::size() const {
  std::lock_guard lock(mu_);
  return keys_.size();
}

bool TicketKeys::from_file() const {
  std::lock_guard lock(mu_);
  return from_file_;
}

void TicketKeys::RotateLocked(health::MonotonicTime now) {
  if (from_file_) return;
  // Key i > 0 stopped encrypting when key i-1 was made; it decrypts for a
  // ticket's lifetime after that, then goes.
  while (keys_.size() > 1 && now - created_[keys_.size() - 2] > kLifetime) {
    keys_.pop_back();
    created_.pop_back();
  }
  if (now - created_.front() < kRotation) return;
  keys_.insert(keys_.begin(), RandomKey());
  created_.insert(created_.begin(), now);
  // The encrypting key alone may be older than a ticket's lifetime (after
  // a long quiet spell); the one it replaces then goes at once.
  if (keys_.size() > 1 && now - created_[1] > kLifetime) {
    keys_.resize(1);
    created_.resize(1);
  }
}

TicketKey TicketKeys::EncryptionKey() {
  std::lock_guard lock(mu_);
  RotateLocked(time_.monotonic());
  return keys_.front();
}

int TicketKeys::DecryptionKey(const unsigned char* name, TicketKey& out) {
  std::lock_guard lock(mu_);
  RotateLocked(time_.monotonic());
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (std::memcmp(keys_[i].name.data(), name, keys_[i].name.size()) != 0) continue;
    out = keys_[i];
    return i == 0 ? 1 : 2;
  }
  return 0;
}

}  // namespace geogate::proxy
