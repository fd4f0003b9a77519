#include "proxy/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace geogate::proxy {

namespace ssl = boost::asio::ssl;

namespace {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

// ALPN: the gateway speaks HTTP/1.1 only. A client that offers only h2 gets
// no ALPN answer (and falls back or fails on its side), never a lie.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  static const unsigned char kHttp11[] = "http/1.1";
  for (unsigned int i = 0; i < inlen;) {
    unsigned int len = in[i];
    if (i + 1 + len > inlen) break;
    if (len == 8 && std::memcmp(in + i + 1, kHttp11, 8) == 0) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

absl::StatusOr<SslContextPtr> MakeServerContext(const config::TlsFiles& files,
                                                std::shared_ptr<TicketKeys> tickets) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // OpenSSL frees a connection's record buffers when they are empty, as
  // HAProxy and NGINX set it: most client connections are idle keep-alives.
  // (Measured: 78.7 -> 77.9 kB RSS per idle TLS connection; an idle
  // connection keeps a read pending, so its read buffer stays. Most of the
  // rest is Asio's ssl engine: a 2 x 17 kB BIO pair and 2 x 17 kB stream
  // buffers per connection.)
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  // Session resumption keeps reconnecting clients off the full handshake:
  // tickets, with the listener's keys (tls_tickets.h) when given, which
  // outlive this context; without them OpenSSL's own per-context keys.
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_SERVER);
  if (tickets) TicketKeys::Install(native, std::move(tickets));
  SSL_CTX_set_alpn_select_cb(native, SelectAlpn, nullptr);
  if (SSL_CTX_use_certificate_chain_file(native, files.cert.c_str()) != 1)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load certificate ", files.cert, ": ", OpenSslError()));
  if (SSL_CTX_use_PrivateKey_file(native, files.key.c_str(), SSL_FILETYPE_PEM) != 1)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load private key ", files.key, ": ", OpenSslError()));
  if (SSL_CTX_check_private_key(native) != 1)
    return absl::InvalidArgumentError(
        absl::StrCat("private key ", files.key, " does not match certificate ", files.cert));
  return ctx;
}

absl::StatusOr<SslContextPtr> MakeClientContext(const std::string& ca_file, bool verify) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_CLIENT);
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);  // pooled upstream connections idle too
  static const unsigned char kAlpn[] = "\x08http/1.1";
  SSL_CTX_set_alpn_protos(native, kAlpn, sizeof kAlpn - 1);
  boost::system::error_code ec;
  if (!verify) {
    ctx->set_verify_mode(ssl::verify_none);
    return ctx;
  }
  ctx->set_verify_mode(ssl::verify_peer, ec);
  if (ca_file.empty())
    ctx->set_default_verify_paths(ec);
  else
    ctx->load_verify_file(ca_file, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrCat("cannot load CA certificates ",
                                                   ca_file.empty() ? "(system)" : ca_file, ": ",
                                                   ec.message()));
  return ctx;
}

int64_t CertificateNotAfter(const ssl::context& ctx) {
  X509* cert = SSL_CTX_get0_certificate(const_cast<ssl::context&>(ctx).native_handle());
  if (cert == nullptr) return 0;
  const ASN1_TIME* na = X509_get0_notAfter(cert);
  struct tm tm {};
  if (ASN1_TIME_to_tm(na, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace geogate::proxy
