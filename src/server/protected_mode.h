// Protected mode (as Redis): with protected-mode yes and no requirepass, only
// clients on the loopback interface are served; any other peer gets
// kDeniedReply and is closed. A server bound to loopback only never sees such
// a peer, so this matters once --bind names another address.
#pragma once

#include <sys/socket.h>

#include <string_view>

namespace pion::server {

// The whole reply line sent to a refused peer.
extern const std::string_view kDeniedReply;

// 127.0.0.0/8, ::1 and IPv4-mapped 127.0.0.0/8; false for other families.
bool IsLoopbackPeer(const sockaddr_storage& peer);
// Whether a bind address is loopback only ("127.x.y.z", "::1", "localhost").
bool IsLoopbackBind(std::string_view bind);

}  // namespace pion::server
