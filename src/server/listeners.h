// Listeners: the server's listening sockets and its TLS context. The RESP port
// (config `port`; 0 binds an ephemeral one, or with a TLS port none: TLS only),
// the TLS port (`tls-port`) and the fast lane (`fastlane-port`, with --kvcache;
// by default the port after the RESP one, see Open), the ports they are bound
// to, and the TlsContext new TLS connections take (CONFIG SET tls-* replaces
// it; open connections keep theirs). CONFIG SET port moves the RESP listener
// (listeners.cc: docs/operations.md "Changing the port at run time"). The
// server owns one (Server::listeners()); the workers accept on the sockets
// (sockets()).
//
// Thread-safety: Open() before the workers start; OpenNewPort() and SwitchPort()
// from one thread at a time (CONFIG SET, under the server's config lock). The
// bound ports read from any thread (port() is an atomic: CONFIG SET port changes
// it); tls_context() and set_tls_context() from any thread (tls_mu_, a leaf
// lock: CONFIG SET takes it under the server's config lock).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "net/tls.h"
#include "server/config.h"

namespace pion::server {

class Worker;
struct ListenSocket;

// The TLS settings of a config (tls-cert-file & co.).
net::TlsConfig TlsConfigOf(const Config& c);

class Listeners {
 public:
  Listeners() = default;
  ~Listeners();  // closes the sockets
  Listeners(const Listeners&) = delete;
  Listeners& operator=(const Listeners&) = delete;

  // Binds the sockets `cfg` asks for (and builds the TLS context when a TLS
  // port or a TLS fast lane needs one): an error stops start-up.
  // cfg->fastlane_port becomes the lane's bound port, 0 when it is off.
  Status Open(Config* cfg);
  // What the workers accept on: the RESP port, the TLS port, the fast lane
  // (TLS when `tls_fastlane`), those that are open.
  std::vector<ListenSocket> sockets(bool tls_fastlane) const;

  // The TCP port actually bound (differs from config().port when that is 0).
  int port() const { return port_.load(std::memory_order_relaxed); }
  // The fast lane's bound port, 0 when it is off.
  int fastlane_port() const { return fastlane_port_; }
  // The TLS port's bound port, 0 when there is none.
  int tls_port() const { return tls_port_; }
  // Whether a TLS listener is open (the TLS port, or the fast lane with
  // `tls_fastlane`): CONFIG SET tls-* builds a new context only then.
  bool serves_tls(bool tls_fastlane) const {
    return tls_listen_fd_ >= 0 || (fastlane_fd_ >= 0 && tls_fastlane);
  }
  // The TLS context new TLS connections use (nullptr without one).
  std::shared_ptr<const net::TlsContext> tls_context() const EXCLUDES(tls_mu_);
  void set_tls_context(std::shared_ptr<const net::TlsContext> ctx) EXCLUDES(tls_mu_);

  // CONFIG SET port: binds `port` on `bind` (an error words the refusal);
  // returns the new socket, which SwitchPort then takes.
  Result<int> OpenNewPort(const std::string& bind, int port);
  // Moves every worker's accepts to `new_fd` (the old socket is closed once
  // the last worker let go of it); returns the bound port.
  int SwitchPort(int new_fd, const std::string& bind,
                 const std::vector<std::unique_ptr<Worker>>& workers);

 private:
  // Binds the fast lane's socket as configured (fastlane_port_, fastlane_fd_).
  Status ListenFastLane(Config* cfg);

  int listen_fd_ = -1;
  std::atomic<int> port_{0};  // CONFIG SET port changes it
  int fastlane_fd_ = -1;
  int fastlane_port_ = 0;
  int tls_listen_fd_ = -1;
  int tls_port_ = 0;
  mutable base::Mutex tls_mu_;
  std::shared_ptr<const net::TlsContext> tls_ctx_ GUARDED_BY(tls_mu_);
};

}  // namespace pion::server
