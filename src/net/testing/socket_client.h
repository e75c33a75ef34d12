// Test-only: a blocking loopback client for the transport tests
// (net/transport_test.cc against a test Service, server/server_conn_test.cc
// against a whole Server): connect, write everything, read with a deadline
// (polling, never sleeping), read to the peer's close.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/clock.h"

namespace pion::net::testing {

// A connected socket to 127.0.0.1:`port`, or -1.
inline int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Writes all of `s` (the tests' inputs fit the socket buffers); false on a
// short or failed write.
inline bool SendAll(int fd, std::string_view s) {
  return ::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

// Waits up to the deadline for `fd` to be readable and reads once: the bytes
// read (appended to `out`), 0 at the peer's close, -1 on an error or when the
// deadline passed.
inline ssize_t ReadOnce(int fd, uint64_t deadline_ns, std::string* out) {
  while (true) {
    uint64_t now = MonotonicNs();
    if (now >= deadline_ns) return -1;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>((deadline_ns - now) / 1000000) + 1) <= 0) continue;
    char buf[65536];
    ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r > 0) out->append(buf, static_cast<size_t>(r));
    return r;
  }
}

// Reads until `n` bytes arrived or `ms` passed (a deadline, not a sleep).
inline std::string ReadFor(int fd, size_t n, int ms) {
  std::string out;
  uint64_t deadline = MonotonicNs() + static_cast<uint64_t>(ms) * 1000000;
  while (out.size() < n && ReadOnce(fd, deadline, &out) > 0) {
  }
  return out;
}

// Reads until the peer's orderly close (read() == 0) or `ms` passed; true only for
// the close, so a server that keeps the connection open fails the caller.
inline bool ReadToEof(int fd, int ms, std::string* out) {
  uint64_t deadline = MonotonicNs() + static_cast<uint64_t>(ms) * 1000000;
  while (true) {
    ssize_t r = ReadOnce(fd, deadline, out);
    if (r == 0) return true;
    if (r < 0) return false;
  }
}

}  // namespace pion::net::testing
