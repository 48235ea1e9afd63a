#include "http/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdio>

namespace hinge::http {

namespace ssl = boost::asio::ssl;

namespace {

// OpenSSL's reason for the last error (its queue is cleared), or `fallback`.
std::string openssl_reason(const boost::system::error_code& ec) {
  std::string r = ec ? ec.message() : std::string();
  unsigned long e = 0;
  while ((e = ERR_get_error()) != 0) {
    const char* why = ERR_reason_error_string(e);
    if (why != nullptr) r = why;
  }
  return r.empty() ? "unknown error" : r;
}

bool readable(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

}  // namespace

StatusOr<ssl::context> make_tls_context(const std::string& cert_file, const std::string& key_file) {
  if (!readable(cert_file)) return Status::Errorf("--tls-cert: cannot read {}", cert_file);
  if (!readable(key_file)) return Status::Errorf("--tls-key: cannot read {}", key_file);
  ssl::context ctx(ssl::context::tls_server);
  boost::system::error_code ec;
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                      ssl::context::no_compression | ssl::context::single_dh_use,
                  ec);
  SSL_CTX* native = ctx.native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  ERR_clear_error();
  ctx.use_certificate_chain_file(cert_file, ec);
  if (ec)
    return Status::Errorf("--tls-cert {}: not a PEM certificate chain ({})", cert_file,
                          openssl_reason(ec));
  ctx.use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec)
    return Status::Errorf("--tls-key {}: not a PEM private key ({})", key_file, openssl_reason(ec));
  if (SSL_CTX_check_private_key(native) != 1)
    return Status::Errorf("--tls-key {} is not the key of the certificate in {} ({})", key_file,
                          cert_file, openssl_reason({}));
  return ctx;
}

}  // namespace hinge::http
