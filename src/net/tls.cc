#include "net/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>

namespace pion::net {

namespace {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  std::string s;
  while (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!s.empty()) s += "; ";
    s += buf;
    e = ERR_get_error();
  }
  return s.empty() ? "unknown TLS error" : s;
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsConfig& cfg) {
  if (cfg.cert_file.empty() || cfg.key_file.empty())
    return Status::InvalidArgument("TLS needs tls-cert-file and tls-key-file");
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Status::IOError("SSL_CTX_new: " + OpenSslError());
  auto fail = [&](const std::string& what) -> Status {
    std::string e = what + ": " + OpenSslError();
    SSL_CTX_free(ctx);
    return Status::InvalidArgument(e);
  };
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Writes may be partial (a full socket) and retried from a queue that grew.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  int min = TLS1_2_VERSION, max = TLS1_3_VERSION;
  if (!cfg.protocols.empty()) {
    bool v12 = cfg.protocols.find("TLSv1.2") != std::string::npos;
    bool v13 = cfg.protocols.find("TLSv1.3") != std::string::npos;
    if (!v12 && !v13) {
      SSL_CTX_free(ctx);
      return Status::InvalidArgument("tls-protocols: want TLSv1.2 and/or TLSv1.3");
    }
    min = v12 ? TLS1_2_VERSION : TLS1_3_VERSION;
    max = v13 ? TLS1_3_VERSION : TLS1_2_VERSION;
  }
  SSL_CTX_set_min_proto_version(ctx, min);
  SSL_CTX_set_max_proto_version(ctx, max);
  if (!cfg.ciphers.empty() && SSL_CTX_set_cipher_list(ctx, cfg.ciphers.c_str()) != 1)
    return fail("tls-ciphers '" + cfg.ciphers + "'");
  if (!cfg.ciphersuites.empty() && SSL_CTX_set_ciphersuites(ctx, cfg.ciphersuites.c_str()) != 1)
    return fail("tls-ciphersuites '" + cfg.ciphersuites + "'");
  if (SSL_CTX_use_certificate_chain_file(ctx, cfg.cert_file.c_str()) != 1)
    return fail("tls-cert-file " + cfg.cert_file);
  if (SSL_CTX_use_PrivateKey_file(ctx, cfg.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return fail("tls-key-file " + cfg.key_file);
  if (SSL_CTX_check_private_key(ctx) != 1) return fail("tls-key-file does not match the cert");
  if (!cfg.ca_cert_file.empty() &&
      SSL_CTX_load_verify_locations(ctx, cfg.ca_cert_file.c_str(), nullptr) != 1)
    return fail("tls-ca-cert-file " + cfg.ca_cert_file);
  if (cfg.auth_clients != TlsClientAuth::kNo) {
    if (cfg.ca_cert_file.empty()) {
      SSL_CTX_free(ctx);
      return Status::InvalidArgument(
          "tls-auth-clients yes/optional needs tls-ca-cert-file (or set tls-auth-clients no)");
    }
    int mode = SSL_VERIFY_PEER;
    if (cfg.auth_clients == TlsClientAuth::kYes) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, nullptr);
  }
  return std::shared_ptr<TlsContext>(new TlsContext(ctx));
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

std::unique_ptr<TlsSession> TlsSession::Accept(std::shared_ptr<const TlsContext> ctx, int fd) {
  SSL* ssl = SSL_new(ctx->raw());
  if (ssl == nullptr) return nullptr;
  if (SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  return std::unique_ptr<TlsSession>(new TlsSession(std::move(ctx), ssl));
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsSession::HandshakeResult TlsSession::Handshake() {
  if (done_) return kDone;
  ERR_clear_error();
  int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    done_ = true;
    return kDone;
  }
  int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return kWant;
  error_ = e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 ? "connection closed during handshake"
                                                           : OpenSslError();
  return kFailed;
}

ssize_t TlsSession::Read(void* buf, size_t n) {
  ERR_clear_error();
  int cap = n > (1u << 30) ? (1 << 30) : static_cast<int>(n);
  int r = SSL_read(ssl_, buf, cap);
  if (r > 0) return r;
  int e = SSL_get_error(ssl_, r);
  switch (e) {
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() == 0) {
        if (errno == 0) return 0;  // EOF without close_notify
        return -1;
      }
      [[fallthrough]];
    default:
      error_ = OpenSslError();
      errno = EIO;
      return -1;
  }
}

ssize_t TlsSession::Writev(const iovec* iov, int n) {
  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    size_t left = iov[i].iov_len;
    while (left > 0) {
      ERR_clear_error();
      int cap = left > (1u << 30) ? (1 << 30) : static_cast<int>(left);
      int r = SSL_write(ssl_, p, cap);
      if (r > 0) {
        total += static_cast<size_t>(r);
        p += r;
        left -= static_cast<size_t>(r);
        continue;
      }
      int e = SSL_get_error(ssl_, r);
      if (total > 0) return static_cast<ssize_t>(total);
      if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
        errno = EAGAIN;
        return -1;
      }
      error_ = OpenSslError();
      if (e != SSL_ERROR_SYSCALL || errno == 0) errno = EIO;
      return -1;
    }
  }
  return static_cast<ssize_t>(total);
}

}  // namespace pion::net
