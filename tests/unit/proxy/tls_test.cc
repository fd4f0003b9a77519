// The OpenSSL contexts the gateway builds: modes that decide what an idle
// TLS connection costs.
#include "proxy/tls.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "testing/simulated_time.h"

using namespace geogate::proxy;

namespace {

// A self-signed certificate and its key as PEM files, made in memory.
struct TestCertFiles {
  TestCertFiles() {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509_sign(cert, key, EVP_sha256());
    auto dir = std::filesystem::temp_directory_path();
    std::string stem = "geogate-tls-test-" + std::to_string(::getpid());
    files.cert = (dir / (stem + ".pem")).string();
    files.key = (dir / (stem + ".key")).string();
    FILE* f = std::fopen(files.cert.c_str(), "w");
    PEM_write_X509(f, cert);
    std::fclose(f);
    f = std::fopen(files.key.c_str(), "w");
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  ~TestCertFiles() {
    std::filesystem::remove(files.cert);
    std::filesystem::remove(files.key);
  }
  geogate::config::TlsFiles files;
};

}  // namespace

TEST_CASE("server and client contexts release the buffers of idle connections", "[tls]") {
  TestCertFiles certs;
  auto server = MakeServerContext(certs.files);
  REQUIRE(server.ok());
  CHECK((SSL_CTX_get_mode((*server)->native_handle()) & SSL_MODE_RELEASE_BUFFERS) != 0);
  auto client = MakeClientContext("", /*verify=*/false);
  REQUIRE(client.ok());
  CHECK((SSL_CTX_get_mode((*client)->native_handle()) & SSL_MODE_RELEASE_BUFFERS) != 0);
}

// ---- session tickets (tls_tickets.h) ----------------------------------------

namespace {

using geogate::health::SimulatedTime;

// One TLS 1.3 handshake between a fresh client and a fresh server
// connection over a memory BIO pair, offering `session` when given.
// @return the client's session afterwards (its ticket read), null on failure,
// and whether the handshake resumed.
struct SessionFree {
  void operator()(SSL_SESSION* s) const { SSL_SESSION_free(s); }
};
struct Outcome {
  std::unique_ptr<SSL_SESSION, SessionFree> session;
  bool resumed = false;
};

Outcome Connect(SSL_CTX* server_ctx, SSL_SESSION* session) {
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, nullptr);
  SSL* client = SSL_new(client_ctx);
  SSL* server = SSL_new(server_ctx);
  BIO* client_bio = nullptr;
  BIO* server_bio = nullptr;
  BIO_new_bio_pair(&client_bio, 0, &server_bio, 0);
  SSL_set_bio(client, client_bio, client_bio);
  SSL_set_bio(server, server_bio, server_bio);
  SSL_set_connect_state(client);
  SSL_set_accept_state(server);
  SSL_set_tlsext_host_name(client, "localhost");
  if (session != nullptr) SSL_set_session(client, session);
  Outcome out;
  bool done = false;
  for (int i = 0; i < 20 && !done; ++i) {
    int c = SSL_do_handshake(client);
    int s = SSL_do_handshake(server);
    done = c == 1 && s == 1;
  }
  if (done) {
    // TLS 1.3 tickets come after the handshake: the client reads them with
    // the first application data.
    char byte = 'x';
    SSL_write(server, &byte, 1);
    char got = 0;
    if (SSL_read(client, &got, 1) == 1) {
      out.session.reset(SSL_get1_session(client));
      out.resumed = SSL_session_reused(client) == 1;
    }
  }
  // A clean close: OpenSSL forgets a session whose connection is dropped
  // without close_notify.
  SSL_shutdown(client);
  SSL_free(client);
  SSL_free(server);
  SSL_CTX_free(client_ctx);
  return out;
}

TicketKey KeyOf(char fill) {
  TicketKey k;
  k.name.fill(static_cast<unsigned char>(fill));
  k.aes.fill(static_cast<unsigned char>(fill + 1));
  k.hmac.fill(static_cast<unsigned char>(fill + 2));
  return k;
}

std::string Base64Key(char fill) {
  TicketKey k = KeyOf(fill);
  std::string raw;
  raw.append(reinterpret_cast<const char*>(k.name.data()), k.name.size());
  raw.append(reinterpret_cast<const char*>(k.aes.data()), k.aes.size());
  raw.append(reinterpret_cast<const char*>(k.hmac.data()), k.hmac.size());
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(raw.data()),
                          static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

TEST_CASE("a ticket resumes on a later context of the same listener (a reload)", "[tls]") {
  TestCertFiles certs;
  SimulatedTime time;
  auto keys = std::make_shared<TicketKeys>(time);
  auto before = MakeServerContext(certs.files, keys);
  auto after = MakeServerContext(certs.files, keys);
  REQUIRE(before.ok());
  REQUIRE(after.ok());
  Outcome first = Connect((*before)->native_handle(), nullptr);
  REQUIRE(first.session != nullptr);
  CHECK_FALSE(first.resumed);
  Outcome again = Connect((*after)->native_handle(), first.session.get());
  CHECK(again.resumed);
}

TEST_CASE("a resumed TLS 1.3 connection gets a fresh ticket for the next one", "[tls]") {
  // TLS 1.3 clients use a ticket once (RFC 8446 C.4; OpenSSL's client does
  // not offer a session again once it resumed it): without a new ticket
  // after each resumption, every other connection of such a client is a
  // full handshake.
  TestCertFiles certs;
  SimulatedTime time;
  std::shared_ptr<TicketKeys> keys;
  SECTION("the listener's keys") {
    keys = std::make_shared<TicketKeys>(time);
  }
  SECTION("OpenSSL's own keys, as before listeners had theirs") {}
  auto ctx = MakeServerContext(certs.files, keys);
  REQUIRE(ctx.ok());
  Outcome last = Connect((*ctx)->native_handle(), nullptr);
  REQUIRE(last.session != nullptr);
  for (int i = 0; i < 3; ++i) {
    INFO("connection " << i + 2);
    Outcome next = Connect((*ctx)->native_handle(), last.session.get());
    CHECK(next.resumed);
    REQUIRE(next.session != nullptr);
    CHECK(next.session.get() != last.session.get());  // a new ticket came
    last = std::move(next);
  }
}

TEST_CASE("contexts without shared keys do not resume each other's tickets", "[tls]") {
  // What every reload did before the listener kept its keys.
  TestCertFiles certs;
  auto before = MakeServerContext(certs.files);
  auto after = MakeServerContext(certs.files);
  REQUIRE(before.ok());
  REQUIRE(after.ok());
  Outcome first = Connect((*before)->native_handle(), nullptr);
  REQUIRE(first.session != nullptr);
  Outcome again = Connect((*after)->native_handle(), first.session.get());
  CHECK_FALSE(again.resumed);
  // ...while the context that issued the ticket resumes it (the check can
  // see a resumption).
  Outcome same = Connect((*before)->native_handle(), first.session.get());
  CHECK(same.resumed);
}

TEST_CASE("generated ticket keys rotate hourly and decrypt for a ticket's lifetime", "[tls]") {
  TestCertFiles certs;
  SimulatedTime time;
  auto keys = std::make_shared<TicketKeys>(time);
  auto ctx = MakeServerContext(certs.files, keys);
  REQUIRE(ctx.ok());
  SSL_CTX* native = (*ctx)->native_handle();
  CHECK(SSL_CTX_get_timeout(native) == TicketKeys::kLifetime.count());
  Outcome first = Connect(native, nullptr);
  REQUIRE(first.session != nullptr);
  TicketKey original = keys->EncryptionKey();

  // One rotation later a new key encrypts; the old one still decrypts.
  time.advance(TicketKeys::kRotation);
  CHECK(keys->EncryptionKey().name != original.name);
  TicketKey found;
  CHECK(keys->DecryptionKey(original.name.data(), found) == 2);  // renew the ticket
  Outcome later = Connect(native, first.session.get());
  CHECK(later.resumed);

  // Once the old key's tickets have all expired it is gone.
  time.advance(TicketKeys::kRotation + TicketKeys::kLifetime);
  CHECK(keys->DecryptionKey(original.name.data(), found) == 0);
  Outcome expired = Connect(native, first.session.get());
  CHECK_FALSE(expired.resumed);
  CHECK(keys->size() == 1);
}

TEST_CASE("edges sharing a ticket key file resume each other's sessions", "[tls]") {
  TestCertFiles certs;
  SimulatedTime time;
  auto edge_a = std::make_shared<TicketKeys>(time);
  auto edge_b = std::make_shared<TicketKeys>(time);
  auto parsed = ParseTicketKeys(Base64Key('a') + "\n" + Base64Key('k') + "\n");
  REQUIRE(parsed.ok());
  edge_a->UseKeys(*parsed);
  // Edge b has the same key only as a decrypting one, as during a rotation.
  edge_b->UseKeys({KeyOf('k'), KeyOf('a')});
  CHECK(edge_a->from_file());
  auto a = MakeServerContext(certs.files, edge_a);
  auto b = MakeServerContext(certs.files, edge_b);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  Outcome first = Connect((*a)->native_handle(), nullptr);
  REQUIRE(first.session != nullptr);
  Outcome moved = Connect((*b)->native_handle(), first.session.get());
  CHECK(moved.resumed);
  // File keys never rotate by themselves.
  time.advance(TicketKeys::kRotation * 5);
  CHECK(edge_a->EncryptionKey().name == KeyOf('a').name);
  // Back to generated keys: the file's tickets no longer resume.
  edge_b->UseKeys({});
  CHECK_FALSE(edge_b->from_file());
  Outcome after = Connect((*b)->native_handle(), first.session.get());
  CHECK_FALSE(after.resumed);
}

TEST_CASE("ticket key files are parsed strictly", "[tls]") {
  auto ok = ParseTicketKeys("# rotated 2026-12-02\n\n" + Base64Key('a') + "\n  " + Base64Key('b') +
                            "  \n");
  REQUIRE(ok.ok());
  REQUIRE(ok->size() == 2);
  CHECK((*ok)[0].name == KeyOf('a').name);
  CHECK((*ok)[0].aes == KeyOf('a').aes);
  CHECK((*ok)[0].hmac == KeyOf('a').hmac);
  CHECK((*ok)[1].name == KeyOf('b').name);

  auto bad = ParseTicketKeys(Base64Key('a') + "\nnot base64!\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "line 2: not base64");
  auto short_key = ParseTicketKeys("c2hvcnQ=\n");  // "short"
  REQUIRE_FALSE(short_key.ok());
  CHECK(std::string(short_key.status().message()).find("line 1: a key is 80 bytes") == 0);
  auto repeated = ParseTicketKeys(Base64Key('a') + "\n" + Base64Key('a') + "\n");
  REQUIRE_FALSE(repeated.ok());
  CHECK(repeated.status().message() == "line 2: repeats the name of an earlier key");
  auto empty = ParseTicketKeys("# nothing yet\n");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message() == "no key in the file");
  auto missing = ReadTicketKeyFile("/nonexistent/geogate-tickets");
  REQUIRE_FALSE(missing.ok());
  CHECK(std::string(missing.status().message()).find("/nonexistent/geogate-tickets") !=
        std::string::npos);
}
