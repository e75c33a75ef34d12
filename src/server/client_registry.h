// ClientRegistry: who is connected and what they hold, shared by every worker.
// It keeps the connected clients by id (CLIENT LIST / INFO / KILL read them
// from any worker), hands out client ids, counts connection slots against
// maxclients and the memory of all clients' buffers against
// maxmemory-clients. The limits are the caller's (Server's run-time settings).
//
// Thread-safety: every method may be called from any thread. A registered
// ClientInfo stays valid while the registry's mutex is held (ForEach); its
// `name` is only read or written under that mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "net/client_info.h"

namespace pion::server {

class ClientRegistry {
 public:
  uint64_t NextId() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  void Register(net::ClientInfo* c);
  void Unregister(net::ClientInfo* c);
  // Calls fn(const ClientInfo&) for every client with the registry locked (fn
  // may read `name`; it must not call back into the registry). A client picked
  // for eviction (PickEvictions) or killed (MarkClosing) is as good as gone: it
  // is left out.
  template <typename Fn>
  void ForEach(Fn&& fn) EXCLUDES(mu_) {
    base::MutexLock lk(&mu_);
    for (auto& [id, c] : clients_)
      if (closing_.count(id) == 0) fn(*c);
  }
  void SetName(net::ClientInfo* c, std::string name);
  std::string Name(const net::ClientInfo* c);
  // CLIENT SETINFO lib-name (`lib_name` true) or lib-ver.
  void SetLibInfo(net::ClientInfo* c, bool lib_name, std::string value);
  // The ACL user a client is authenticated as (guarded like `name`).
  void SetUser(net::ClientInfo* c, std::string user);
  std::string User(const net::ClientInfo* c);
  // Calls fn(const ClientInfo&) for `c` with the registry locked.
  template <typename Fn>
  void With(const net::ClientInfo* c, Fn&& fn) EXCLUDES(mu_) {
    base::MutexLock lk(&mu_);
    fn(*c);
  }
  // Calls fn(ClientInfo*) for client `id` with the registry locked, or
  // fn(nullptr) when no such client is registered (or it is being evicted).
  template <typename Fn>
  void WithId(uint64_t id, Fn&& fn) EXCLUDES(mu_) {
    base::MutexLock lk(&mu_);
    auto it = clients_.find(id);
    fn(it == clients_.end() || closing_.count(id) != 0 ? nullptr : it->second);
  }
  // The index of the worker that owns client `id`; -1 if there is none.
  int WorkerOf(uint64_t id);
  // CLIENT KILL of another worker's client: from now on it is left out as if
  // gone (as Redis frees it at once), while its worker closes it. The index of
  // that worker, or -1 when there is no such client or it is already closing.
  int MarkClosing(uint64_t id) EXCLUDES(mu_);

  // Connection slots: TryAcquireSlot fails when `max` are taken.
  bool TryAcquireSlot(uint64_t max);
  void ReleaseSlot() { connected_.fetch_sub(1, std::memory_order_relaxed); }
  uint64_t connected() const { return connected_.load(std::memory_order_relaxed); }

  // Memory held by all clients' buffers (query buffers, big arguments, unsent
  // replies). ReserveMemory() admits `n` more bytes if that stays within
  // `limit` (0 = none) and counts them; AdjustMemory() corrects the count by
  // what a connection actually holds.
  bool ReserveMemory(uint64_t n, uint64_t limit);
  void AdjustMemory(int64_t delta) { memory_.fetch_add(delta, std::memory_order_relaxed); }
  uint64_t memory() const {
    int64_t v = memory_.load(std::memory_order_relaxed);
    return v < 0 ? 0 : static_cast<uint64_t>(v);
  }

  // Client eviction (maxmemory-clients, as Redis): picks the clients to close
  // so that the memory of all clients' buffers, less what the clients already
  // picked still hold, plus `incoming` (bytes client `requester` is about to
  // take; 0: none) fits in `limit`: the largest first (tot_mem, the
  // requester's with `incoming` added), never one with no_evict set nor one
  // picked before. The picked ids go to `*out` (the caller closes them; they
  // stay picked until they unregister). When the requester is picked, its
  // growth goes with it. When the memory cannot fit even so, `incoming` bytes
  // pick nobody (the growth is refused instead); with `incoming` 0 (memory
  // already past the limit) every evictable client goes, largest first, until
  // it fits, as Redis does.
  enum class Eviction { kFits, kRequesterPicked, kNoRoom };
  Eviction PickEvictions(uint64_t limit, uint64_t incoming, uint64_t requester,
                         std::vector<uint64_t>* out) EXCLUDES(mu_);

 private:
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> connected_{0};
  std::atomic<int64_t> memory_{0};
  base::Mutex mu_;
  std::unordered_map<uint64_t, net::ClientInfo*> clients_ GUARDED_BY(mu_);
  // Picked for eviction or killed (MarkClosing), not yet gone.
  std::unordered_set<uint64_t> closing_ GUARDED_BY(mu_);
};

}  // namespace pion::server
