// Listeners (listeners.h): binding the server's sockets at start-up, and
// CONFIG SET port (docs/operations.md "Changing the port at run time"): the
// new listening socket is opened first, so a port that cannot be bound
// refuses the whole CONFIG SET with nothing changed; once every other setting
// applied, each worker accepts on the new socket instead of the old one, and
// the old one is closed when the last worker let go of it. Connections already
// open stay.
#include "server/listeners.h"

#include <unistd.h>

#include <atomic>
#include <memory>

#include "base/log.h"
#include "kvproto/errors.h"
#include "net/listener.h"
#include "server/worker.h"

namespace pion::server {

net::TlsConfig TlsConfigOf(const Config& c) {
  net::TlsConfig t;
  t.cert_file = c.tls_cert_file;
  t.key_file = c.tls_key_file;
  t.ca_cert_file = c.tls_ca_cert_file;
  t.auth_clients = c.tls_auth_clients == "no"         ? net::TlsClientAuth::kNo
                   : c.tls_auth_clients == "optional" ? net::TlsClientAuth::kOptional
                                                      : net::TlsClientAuth::kYes;
  t.protocols = c.tls_protocols;
  t.ciphers = c.tls_ciphers;
  t.ciphersuites = c.tls_ciphersuites;
  return t;
}

Listeners::~Listeners() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (fastlane_fd_ >= 0) ::close(fastlane_fd_);
  if (tls_listen_fd_ >= 0) ::close(tls_listen_fd_);
}

Status Listeners::Open(Config* cfg) {
  // A TLS context for the TLS port and/or a TLS fast lane (--tls-fastlane yes
  // without certificates is a start-up error, as the TLS port's).
  if (cfg->tls_port != 0 || (cfg->tls_fastlane && cfg->kvcache && cfg->fastlane_port != 0)) {
    auto ctx = net::TlsContext::Create(TlsConfigOf(*cfg));
    if (!ctx.ok()) return ctx.status();
    set_tls_context(*ctx);
  }
  if (cfg->tls_port != 0) {
    auto tfd = net::Listen(cfg->bind, cfg->tls_port);
    if (!tfd.ok()) return tfd.status();
    tls_listen_fd_ = *tfd;
    tls_port_ = net::BoundPort(tls_listen_fd_);
  }
  // --port 0 with a TLS port: TLS only (as Redis). Without one, port 0 binds
  // an ephemeral port (tests).
  if (cfg->port != 0 || cfg->tls_port == 0) {
    auto fd = net::Listen(cfg->bind, cfg->port);
    if (!fd.ok()) return fd.status();
    listen_fd_ = *fd;
    port_ = net::BoundPort(listen_fd_);
  }
  return ListenFastLane(cfg);
}

Status Listeners::ListenFastLane(Config* cfg) {
  // Off without --kvcache (the lane serves the attention commands) or when 0.
  const bool defaulted = cfg->fastlane_port < 0;
  if (!cfg->kvcache || cfg->fastlane_port == 0) {
    if (!cfg->kvcache && cfg->fastlane_port > 0)
      LOG_WARNING("fastlane-port %d ignored: the fast lane needs --kvcache", cfg->fastlane_port);
    cfg->fastlane_port = 0;
    return Status::OK();
  }
  if (defaulted && listen_fd_ < 0 && !cfg->tls_fastlane) {
    // TLS only (--port 0): no plaintext port for a plaintext lane to follow.
    cfg->fastlane_port = 0;
    return Status::OK();
  }
  // A TLS lane on a TLS-only server follows the TLS port.
  int base = listen_fd_ >= 0 ? port() : tls_port_;
  int want = defaulted ? base + 1 : cfg->fastlane_port;
  if (want > 65535) {
    LOG_WARNING("fast lane off: port + 1 (%d) is not a TCP port; set --fastlane-port", want);
    cfg->fastlane_port = 0;
    return Status::OK();
  }
  auto fd = net::Listen(cfg->bind, want);
  if (!fd.ok()) {
    // A port asked for is a start-up error; the default one is only a warning
    // (another server may hold port + 1), and the lane stays off.
    if (!defaulted) return fd.status();
    LOG_WARNING("fast lane off: %s (set --fastlane-port, or 0 to silence this)",
                fd.status().ToString().c_str());
    cfg->fastlane_port = 0;
    return Status::OK();
  }
  fastlane_fd_ = *fd;
  fastlane_port_ = net::BoundPort(fastlane_fd_);
  cfg->fastlane_port = fastlane_port_;
  return Status::OK();
}

std::vector<ListenSocket> Listeners::sockets(bool tls_fastlane) const {
  std::vector<ListenSocket> out;
  if (listen_fd_ >= 0) out.push_back({listen_fd_, net::Protocol::kResp});
  if (tls_listen_fd_ >= 0) out.push_back({tls_listen_fd_, net::Protocol::kResp, true});
  if (fastlane_fd_ >= 0) out.push_back({fastlane_fd_, net::Protocol::kFastLane, tls_fastlane});
  return out;
}

std::shared_ptr<const net::TlsContext> Listeners::tls_context() const {
  base::MutexLock lk(&tls_mu_);
  return tls_ctx_;
}

void Listeners::set_tls_context(std::shared_ptr<const net::TlsContext> ctx) {
  base::MutexLock lk(&tls_mu_);
  tls_ctx_ = std::move(ctx);
}

Result<int> Listeners::OpenNewPort(const std::string& bind, int port) {
  if (listen_fd_ < 0)  // TLS only (--port 0 with a tls-port): no plain listener to move
    return Status::InvalidArgument(ConfigSetPortError());
  auto fd = net::Listen(bind, port);
  if (!fd.ok()) {
    LOG_WARNING("CONFIG SET port %d: %s", port, fd.status().ToString().c_str());
    return Status::InvalidArgument(ConfigSetPortError());
  }
  return *fd;
}

int Listeners::SwitchPort(int new_fd, const std::string& bind,
                          const std::vector<std::unique_ptr<Worker>>& workers) {
  int old_fd = listen_fd_;
  listen_fd_ = new_fd;
  int bound = net::BoundPort(new_fd);
  port_.store(bound, std::memory_order_relaxed);
  LOG_NOTICE("Listening on %s:%d (was port %d)", bind.c_str(), bound, net::BoundPort(old_fd));
  if (workers.empty()) {
    ::close(old_fd);
    return bound;
  }
  auto left = std::make_shared<std::atomic<size_t>>(workers.size());
  for (auto& w : workers) {
    w->ReplaceListener(old_fd, new_fd, [left, old_fd] {
      if (left->fetch_sub(1) == 1) ::close(old_fd);
    });
  }
  return bound;
}

}  // namespace pion::server
