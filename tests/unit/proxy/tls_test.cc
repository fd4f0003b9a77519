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
#include <string>

#include <catch2/catch.hpp>

using namespace geogate::gateway;

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
