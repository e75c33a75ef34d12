// Client eviction (maxmemory-clients), as Redis 7 does it: the buffers of all
// clients (query buffers, big arguments, unsent replies) share one bound; when
// they pass it, the clients holding the most are closed, largest first, until
// the rest fits. A client that turned CLIENT NO-EVICT on is never picked. The
// transport only reports what each connection holds (ClientInfo::tot_mem, the
// Service's Reserve/AdjustClientMemory); which clients go is decided here.
//
// A picked client is closed by its own worker (Server::KillClient), so its
// memory is released a little later: until it unregisters, the registry
// counts what it still holds as already gone, and does not pick it twice.
#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "server/server.h"

namespace pion::server {

namespace {

constexpr uint64_t kEvictRetryUs = 100'000;

// Closes the picked clients and counts them (INFO evicted_clients).
void Evict(Server& server, const std::vector<uint64_t>& ids, std::atomic<uint64_t>& count) {
  for (uint64_t id : ids)
    if (server.ClosePickedClient(id)) count.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

bool Server::ReserveClientMemory(uint64_t n, const ClientInfo* who) {
  uint64_t limit = settings_.maxmemory_clients();
  if (limit != 0 && who != nullptr && who->no_evict.load(std::memory_order_relaxed)) {
    // As Redis: a NO-EVICT client's input is never refused for client
    // memory; the other clients may be evicted to make room for it.
    AdjustClientMemory(static_cast<int64_t>(n));
    return true;
  }
  if (limit == 0 || clients_.memory() + n <= limit) return clients_.ReserveMemory(n, limit);
  std::vector<uint64_t> ids;
  ClientRegistry::Eviction e = clients_.PickEvictions(limit, n, who != nullptr ? who->id : 0, &ids);
  Evict(*this, ids, evicted_clients_);
  // Refused when nobody could make room, or when the requester itself, grown
  // by `n`, was picked (its worker closes it).
  if (e != ClientRegistry::Eviction::kFits) return false;
  // Room is made: the evicted clients' buffers are released when their workers
  // close them, so the bytes are admitted past the bound meanwhile.
  clients_.AdjustMemory(static_cast<int64_t>(n));
  return true;
}

void Server::AdjustClientMemory(int64_t delta) {
  clients_.AdjustMemory(delta);
  if (delta <= 0) return;
  // Past the bound with nobody left to evict (only NO-EVICT clients hold the
  // memory), every growth would scan all clients again: after such a scan the
  // growths of the next 100 ms leave it to the cron.
  uint64_t futile = evict_futile_us_.load(std::memory_order_relaxed);
  if (futile != 0 && MonotonicUs() - futile < kEvictRetryUs) return;
  EvictClients();
}

void Server::EvictClients() {
  uint64_t limit = settings_.maxmemory_clients();
  if (limit == 0 || clients_.memory() <= limit) return;
  std::vector<uint64_t> ids;
  ClientRegistry::Eviction e = clients_.PickEvictions(limit, 0, 0, &ids);
  evict_futile_us_.store(e == ClientRegistry::Eviction::kNoRoom && ids.empty() ? MonotonicUs() : 0,
                         std::memory_order_relaxed);
  Evict(*this, ids, evicted_clients_);
}

}  // namespace pion::server
