// The open-file limit the server needs: maxclients connections plus a reserve
// for its own descriptors (listening sockets, epoll and event fds, WAL and
// snapshot files), as Redis' adjustOpenFilesLimit does.
#pragma once

#include <cstdint>
#include <string>

namespace pion::server {

inline constexpr uint64_t kReservedFds = 32;

struct FdLimit {
  uint64_t maxclients = 0;  // what fits the limit (<= the one asked for)
  uint64_t nofile = 0;      // RLIMIT_NOFILE soft limit now in force
  std::string warning;      // non-empty when maxclients had to be lowered or raising failed
};

// Raises RLIMIT_NOFILE toward maxclients + kReservedFds (up to the hard limit,
// or beyond it when the process may) and returns the maxclients that fits.
FdLimit AdjustOpenFileLimit(uint64_t maxclients);

// The largest maxclients the current RLIMIT_NOFILE allows (CONFIG SET's bound).
uint64_t MaxClientsForCurrentLimit();

}  // namespace pion::server
