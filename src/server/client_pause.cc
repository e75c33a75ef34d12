#include "server/client_pause.h"

#include <algorithm>

#include "base/clock.h"

namespace pion::server {

void ClientPause::Pause(int64_t end_ms, bool all) {
  base::MutexLock l(&mu_);
  const int64_t now = UnixMillis();
  const int64_t cur = end_ms_.load(std::memory_order_relaxed);
  if (cur > now) {  // in force: the longer end and the wider kind, as Redis
    end_ms = std::max(end_ms, cur);
    all = all || all_.load(std::memory_order_relaxed);
  }
  all_.store(all, std::memory_order_relaxed);
  end_ms_.store(end_ms, std::memory_order_relaxed);
}

void ClientPause::Unpause() {
  base::MutexLock l(&mu_);
  end_ms_.store(0, std::memory_order_relaxed);
  all_.store(false, std::memory_order_relaxed);
}

}  // namespace pion::server
