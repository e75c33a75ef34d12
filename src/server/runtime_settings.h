// RuntimeSettings: the settings CONFIG SET may change while the workers run
// (maxclients, timeout, the client buffer limits, maxmemory and
// maxmemory-clients), as relaxed atomics that any thread reads without a
// lock. The server owns one (Server::settings()) and publishes the config
// into it at start-up and after every CONFIG SET; the Config itself, which
// CONFIG GET reads, stays the server's (under its config lock).
//
// Thread-safety: Publish() from one thread at a time (the server's start-up,
// then CONFIG SET under the config lock); the readers from any thread. A
// reader sees each value either before or after a CONFIG SET, never torn;
// two values read one after the other may straddle it (as in Redis, where a
// CONFIG SET lands between two commands).
#pragma once

#include <atomic>
#include <cstdint>

#include "net/service.h"
#include "server/config.h"

namespace pion::server {

// maxmemory-clients in bytes: a percentage of maxmemory resolved (none while
// maxmemory is 0), and at least 128 KiB when set (as Redis); 0 = no limit.
uint64_t EffectiveClientsMemory(const Config& c);

class RuntimeSettings {
 public:
  void Publish(const Config& c);

  uint64_t maxclients() const { return maxclients_.load(kR); }
  uint64_t timeout_s() const { return timeout_s_.load(kR); }
  // client-output-buffer-limit normal <hard> <soft> <seconds>.
  uint64_t output_limit() const { return output_limit_.load(kR); }
  uint64_t output_soft_limit() const { return output_soft_limit_.load(kR); }
  uint64_t output_soft_seconds() const { return output_soft_seconds_.load(kR); }
  // client-output-buffer-limit pubsub <hard> <soft> <seconds>.
  net::Service::OutputLimits pubsub_output_limits() const {
    return {ps_output_limit_.load(kR), ps_output_soft_limit_.load(kR),
            ps_output_soft_seconds_.load(kR)};
  }
  // The smallest nonzero output limit of either class (UINT64_MAX when there
  // is none): a connection below it checks nothing.
  uint64_t output_check_threshold() const {
    uint64_t least = UINT64_MAX;
    for (uint64_t v : {output_limit(), output_soft_limit(), ps_output_limit_.load(kR),
                       ps_output_soft_limit_.load(kR)})
      if (v != 0 && v < least) least = v;
    return least;
  }
  // client-query-buffer-limit.
  uint64_t query_buffer_limit() const { return query_buffer_limit_.load(kR); }
  uint64_t maxmemory() const { return maxmemory_.load(kR); }
  // The client memory limit in bytes (EffectiveClientsMemory; 0 = none).
  uint64_t maxmemory_clients() const { return maxmemory_clients_.load(kR); }

 private:
  static constexpr auto kR = std::memory_order_relaxed;
  std::atomic<uint64_t> maxclients_{0};
  std::atomic<uint64_t> timeout_s_{0};
  std::atomic<uint64_t> output_limit_{0};
  std::atomic<uint64_t> output_soft_limit_{0};
  std::atomic<uint64_t> output_soft_seconds_{0};
  std::atomic<uint64_t> ps_output_limit_{0};
  std::atomic<uint64_t> ps_output_soft_limit_{0};
  std::atomic<uint64_t> ps_output_soft_seconds_{0};
  std::atomic<uint64_t> query_buffer_limit_{0};
  std::atomic<uint64_t> maxmemory_{0};
  std::atomic<uint64_t> maxmemory_clients_{0};
};

}  // namespace pion::server
