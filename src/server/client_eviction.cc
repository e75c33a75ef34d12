// ClientEviction (client_eviction.h): maxmemory-clients.
#include "server/client_eviction.h"

#include <cstdint>
#include <vector>

#include "base/clock.h"

namespace pion::server {

namespace {
constexpr uint64_t kEvictRetryUs = 100'000;
}  // namespace

void ClientEviction::Close(const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids)
    if (close_picked_(id)) evicted_clients_.fetch_add(1, std::memory_order_relaxed);
}

bool ClientEviction::Reserve(uint64_t n, const net::ClientInfo* who) {
  uint64_t limit = settings_->maxmemory_clients();
  if (limit != 0 && who != nullptr && who->no_evict.load(std::memory_order_relaxed)) {
    // As Redis: a NO-EVICT client's input is never refused for client
    // memory; the other clients may be evicted to make room for it.
    Adjust(static_cast<int64_t>(n));
    return true;
  }
  if (limit == 0 || clients_->memory() + n <= limit) return clients_->ReserveMemory(n, limit);
  std::vector<uint64_t> ids;
  ClientRegistry::Eviction e =
      clients_->PickEvictions(limit, n, who != nullptr ? who->id : 0, &ids);
  Close(ids);
  // Refused when nobody could make room, or when the requester itself, grown
  // by `n`, was picked (its worker closes it).
  if (e != ClientRegistry::Eviction::kFits) return false;
  // Room is made: the evicted clients' buffers are released when their workers
  // close them, so the bytes are admitted past the bound meanwhile.
  clients_->AdjustMemory(static_cast<int64_t>(n));
  return true;
}

void ClientEviction::Adjust(int64_t delta) {
  clients_->AdjustMemory(delta);
  if (delta <= 0) return;
  // Past the bound with nobody left to evict (only NO-EVICT clients hold the
  // memory), every growth would scan all clients again: after such a scan the
  // growths of the next 100 ms leave it to the cron.
  uint64_t futile = evict_futile_us_.load(std::memory_order_relaxed);
  if (futile != 0 && MonotonicUs() - futile < kEvictRetryUs) return;
  Evict();
}

void ClientEviction::Evict() {
  uint64_t limit = settings_->maxmemory_clients();
  if (limit == 0 || clients_->memory() <= limit) return;
  std::vector<uint64_t> ids;
  ClientRegistry::Eviction e = clients_->PickEvictions(limit, 0, 0, &ids);
  evict_futile_us_.store(e == ClientRegistry::Eviction::kNoRoom && ids.empty() ? MonotonicUs() : 0,
                         std::memory_order_relaxed);
  Close(ids);
}

}  // namespace pion::server
