#include "server/attention.h"

#include <algorithm>

#include "base/cpu.h"

namespace pion::server {

uint32_t Attention::ResolveThreads(int threads) {
  if (threads > 0) return static_cast<uint32_t>(threads);
  return CoreCount();
}

Attention::Attention(int threads)
    : threads_(ResolveThreads(threads)), pool_(threads_, "pion-attend") {}

void Attention::Apply(const Config& cfg) {
  constexpr auto kR = std::memory_order_relaxed;
  cache_.SetLimits({cfg.attend_max_slots, cfg.attend_maxmemory, cfg.attend_cold_slots});
  if (auto p = attend::ParsePrecision(cfg.attend_precision))
    precision_.store(static_cast<uint8_t>(*p), kR);
  pool_min_bytes_.store(cfg.attend_pool_min_bytes, kR);
}

}  // namespace pion::server
