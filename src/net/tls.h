// TLS for the transport (OpenSSL). A TlsContext is built from the tls-*
// settings and is immutable: a reload (CONFIG SET tls-cert-file ...) builds a
// new one that new connections use, while open connections keep theirs (each
// TlsSession holds a reference). A TlsSession is one connection's TLS state
// over a non-blocking socket: the handshake is driven by the connection's
// epoll events (Handshake() returns kWant until it finishes), so a client that
// stalls mid-handshake holds only its own connection.
//
// Reads and writes keep the plaintext path's shapes: Read() fills the caller's
// buffer (the parser's query buffer, or a big argument's own buffer, so a
// 16 MiB upload is decrypted straight into place) and Writev() encrypts the
// output queue's iovecs as they are (stored chunks queued by reference are
// read by the cipher in place; the one copy is the encryption itself).
//
// Thread-safety: a TlsContext may be shared by every thread; a TlsSession
// belongs to its connection's thread.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace pion::net {

enum class TlsClientAuth { kNo, kYes, kOptional };

struct TlsConfig {
  std::string cert_file, key_file, ca_cert_file;
  TlsClientAuth auth_clients = TlsClientAuth::kYes;
  std::string protocols;     // "TLSv1.2 TLSv1.3"; empty = both
  std::string ciphers;       // TLS <= 1.2 list; empty = OpenSSL's default
  std::string ciphersuites;  // TLS 1.3 list; empty = OpenSSL's default
};

class TlsContext {
 public:
  // Loads the certificate, key and CA; errors name the file and OpenSSL's reason.
  static Result<std::shared_ptr<TlsContext>> Create(const TlsConfig& cfg);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  SSL_CTX* raw() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

class TlsSession {
 public:
  enum HandshakeResult { kDone, kWant, kFailed };

  // nullptr if OpenSSL cannot allocate the session.
  static std::unique_ptr<TlsSession> Accept(std::shared_ptr<const TlsContext> ctx, int fd);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  HandshakeResult Handshake();
  bool handshake_done() const { return done_; }
  // As read(2): > 0 bytes, 0 at the peer's close, -1 with errno (EAGAIN when
  // more socket input is needed, EIO for a TLS error).
  ssize_t Read(void* buf, size_t n);
  // As writev(2): bytes taken (possibly fewer than offered), -1 with errno.
  ssize_t Writev(const iovec* iov, int n);
  // Why the handshake or the session failed (OpenSSL's reason).
  const std::string& error() const { return error_; }

 private:
  TlsSession(std::shared_ptr<const TlsContext> ctx, SSL* ssl) : ctx_(std::move(ctx)), ssl_(ssl) {}
  std::shared_ptr<const TlsContext> ctx_;
  SSL* ssl_;
  bool done_ = false;
  std::string error_;
};

}  // namespace pion::net
