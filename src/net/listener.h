// Listening sockets: one per port and protocol. The socket is non-blocking and
// close-on-exec; the caller's event loop accepts on it.
#pragma once

#include <string>

#include "base/status.h"

namespace pion::net {

inline constexpr int kListenBacklog = 4096;

// Binds and listens on `bind` ("*" for every IPv4 address, else a numeric
// address) and `port` (0: the kernel picks one, see BoundPort). Returns the fd.
Result<int> Listen(const std::string& bind, int port);

// The local port `fd` is bound to (0 if it cannot be read).
int BoundPort(int fd);

}  // namespace pion::net
