// Attention: the server's side of Stage 2 (src/server/commands/attend.cc,
// docs/attention.md): the warm/cold slot cache and the compute pool, which live as
// long as the server, the settings CONFIG SET changes (attend-precision for new
// slots, attend-pool-min-bytes, the cache's limits), the pool's size and the
// number of queries answered (INFO attend). The server owns one
// (CommandEnv::attention()); the slots of namespace <ns> and <ns>_attn go when
// the store drops or evicts <ns> (the server's removal observer), all of them
// on FLUSHALL.
//
// Thread-safety: any thread. The settings are relaxed atomics, read once per
// query; the cache and the pool are thread-safe themselves.
#pragma once

#include <atomic>
#include <cstdint>

#include "attend/compute_pool.h"
#include "attend/precision.h"
#include "attend/slot_cache.h"
#include "server/config.h"

namespace pion::server {

class Attention {
 public:
  // `threads`: the compute pool's size (attend-threads; 0 = one per core).
  explicit Attention(int threads);
  Attention(const Attention&) = delete;
  Attention& operator=(const Attention&) = delete;

  attend::SlotCache& cache() { return cache_; }
  attend::ComputePool& pool() { return pool_; }

  // The precision new slots are kept in (attend-precision).
  attend::Precision precision() const {
    return static_cast<attend::Precision>(precision_.load(std::memory_order_relaxed));
  }
  // Queries that read fewer bytes run inline on the worker (attend-pool-min-bytes).
  uint64_t pool_min_bytes() const { return pool_min_bytes_.load(std::memory_order_relaxed); }
  uint32_t threads() const { return threads_; }
  void CountQuery() { queries_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t queries() const { return queries_.load(std::memory_order_relaxed); }

  // Takes the run-time settings of `cfg` (start-up and each CONFIG SET).
  void Apply(const Config& cfg);
  // Shutdown: queued queries and WARMs run, then the pool's threads join.
  void Stop() { pool_.Stop(); }

 private:
  static uint32_t ResolveThreads(int threads);

  attend::SlotCache cache_;
  const uint32_t threads_;
  attend::ComputePool pool_;
  std::atomic<uint8_t> precision_{static_cast<uint8_t>(attend::Precision::kF16)};
  std::atomic<uint64_t> pool_min_bytes_{0};
  std::atomic<uint64_t> queries_{0};
};

}  // namespace pion::server
