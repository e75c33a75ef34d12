// CONFIG SET port (docs/operations.md "Changing the port at run time"): the
// new listening socket is opened first, so a port that cannot be bound
// refuses the whole CONFIG SET with nothing changed; once every other setting
// applied, each worker accepts on the new socket instead of the old one, and
// the old one is closed when the last worker let go of it. Connections already
// open stay.
#include <unistd.h>

#include <atomic>
#include <memory>

#include "base/log.h"
#include "net/listener.h"
#include "kvproto/errors.h"
#include "server/server.h"
#include "server/worker.h"

namespace pion::server {

Result<int> Server::OpenNewPort(int port) {
  if (listen_fd_ < 0)  // TLS only (--port 0 with a tls-port): no plain listener to move
    return Status::InvalidArgument(ConfigSetPortError());
  auto fd = net::Listen(cfg_.bind, port);
  if (!fd.ok()) {
    LOG_WARNING("CONFIG SET port %d: %s", port, fd.status().ToString().c_str());
    return Status::InvalidArgument(ConfigSetPortError());
  }
  return *fd;
}

int Server::SwitchListener(int new_fd) {
  int old_fd = listen_fd_;
  listen_fd_ = new_fd;
  int bound = net::BoundPort(new_fd);
  port_.store(bound, std::memory_order_relaxed);
  LOG_NOTICE("Listening on %s:%d (was port %d)", cfg_.bind.c_str(), bound, net::BoundPort(old_fd));
  if (workers_.empty()) {
    ::close(old_fd);
    return bound;
  }
  auto left = std::make_shared<std::atomic<size_t>>(workers_.size());
  for (auto& w : workers_) {
    w->ReplaceListener(old_fd, new_fd, [left, old_fd] {
      if (left->fetch_sub(1) == 1) ::close(old_fd);
    });
  }
  return bound;
}

}  // namespace pion::server
