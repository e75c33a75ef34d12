#include "server/fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace pion::server {

namespace {

uint64_t Fits(rlim_t nofile) {
  if (nofile == RLIM_INFINITY) return UINT64_MAX;
  return nofile > kReservedFds ? static_cast<uint64_t>(nofile) - kReservedFds : 0;
}

}  // namespace

uint64_t MaxClientsForCurrentLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return UINT64_MAX;
  return Fits(rl.rlim_cur);
}

FdLimit AdjustOpenFileLimit(uint64_t maxclients) {
  FdLimit out;
  out.maxclients = maxclients;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    out.warning = std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    return out;
  }
  const rlim_t want = static_cast<rlim_t>(maxclients + kReservedFds);
  out.nofile = rl.rlim_cur;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    // The whole amount first (raising the hard limit too works for root),
    // then as much as the hard limit allows.
    rlim_t best = rl.rlim_cur;
    rlimit all{want, rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? rl.rlim_max : want};
    rlim_t capped = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    rlimit some{capped, rl.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &all) == 0)
      best = want;
    else if (capped > rl.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &some) == 0)
      best = capped;
    out.nofile = best;
  }
  uint64_t fits = Fits(out.nofile);
  if (fits < maxclients) {
    out.maxclients = fits == 0 ? 1 : fits;
    out.warning = "open file limit is " + std::to_string(out.nofile) + " (wanted " +
                  std::to_string(maxclients + kReservedFds) + " for maxclients " +
                  std::to_string(maxclients) + "): maxclients lowered to " +
                  std::to_string(out.maxclients);
  }
  return out;
}

}  // namespace pion::server
