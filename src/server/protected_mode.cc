#include "server/protected_mode.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

namespace pion::server {

const std::string_view kDeniedReply =
    "-DENIED pion is running in protected mode because protected mode is enabled and no "
    "password is set. In this mode connections are only accepted from the loopback interface. "
    "To accept clients from other hosts, either 1) set a password with --requirepass (or "
    "requirepass in pion.conf), or 2) disable protected mode with --protected-mode no after "
    "making sure the server is not reachable from untrusted networks; then restart the "
    "server.\r\n";

bool IsLoopbackPeer(const sockaddr_storage& peer) {
  if (peer.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&peer);
    return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  }
  if (peer.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&peer);
    if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) return a->sin6_addr.s6_addr[12] == 127;
    return false;
  }
  return false;
}

bool IsLoopbackBind(std::string_view bind) {
  if (bind == "localhost" || bind == "::1") return true;
  std::string s(bind);
  in_addr a4{};
  if (::inet_pton(AF_INET, s.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  return false;
}

}  // namespace pion::server
