// ClientEviction: maxmemory-clients, as Redis 7 does it. The buffers of all
// clients (query buffers, big arguments, unsent replies) share one bound; when
// they pass it, the clients holding the most are closed, largest first, until
// the rest fits. A client that turned CLIENT NO-EVICT on is never picked. The
// transport only reports what each connection holds (ClientInfo::tot_mem, the
// Service's Reserve/AdjustClientMemory); which clients go is decided here. The
// server owns one (Server::client_eviction(), CommandEnv::client_eviction()).
//
// A picked client is closed by its own worker (the `close_picked` callback the
// server gives, Server::ClosePickedClient), so its memory is released a little
// later: until it unregisters, the registry counts what it still holds as
// already gone, and does not pick it twice.
//
// Thread-safety: any thread; the state is two atomics and the registry's own
// lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "net/client_info.h"
#include "server/client_registry.h"
#include "server/runtime_settings.h"

namespace pion::server {

class ClientEviction {
 public:
  // `close_picked(id)` asks client `id`'s worker to close it (a client
  // PickEvictions already marked as closing); false if it is gone.
  ClientEviction(ClientRegistry* clients, const RuntimeSettings* settings,
                 std::function<bool(uint64_t)> close_picked)
      : clients_(clients), settings_(settings), close_picked_(std::move(close_picked)) {}
  ClientEviction(const ClientEviction&) = delete;
  ClientEviction& operator=(const ClientEviction&) = delete;

  // Admits `n` more bytes of client buffers for `who` (nullptr: no client in
  // particular), closing the clients that hold the most (never a CLIENT
  // NO-EVICT one) to make room within maxmemory-clients; false (the caller
  // refuses the growth) when that cannot make room or when `who`, grown by
  // `n`, is the one to go (it is closed then).
  bool Reserve(uint64_t n, const net::ClientInfo* who = nullptr);
  // Corrects the count by what a connection holds and evicts the same way
  // once it passes the limit.
  void Adjust(int64_t delta);
  // Evicts down to the limit: after CONFIG SET lowered it, and from the cron
  // (a client's NO-EVICT turned off).
  void Evict();
  // INFO evicted_clients (CONFIG RESETSTAT zeroes it).
  uint64_t evicted_clients() const { return evicted_clients_.load(std::memory_order_relaxed); }
  void ResetStats() { evicted_clients_.store(0, std::memory_order_relaxed); }

 private:
  // Closes the picked clients and counts them.
  void Close(const std::vector<uint64_t>& ids);

  ClientRegistry* const clients_;
  const RuntimeSettings* const settings_;
  const std::function<bool(uint64_t)> close_picked_;
  std::atomic<uint64_t> evicted_clients_{0};
  // When an eviction last found nobody to evict (0: it did not).
  std::atomic<uint64_t> evict_futile_us_{0};
};

}  // namespace pion::server
