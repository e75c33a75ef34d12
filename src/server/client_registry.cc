#include "server/client_registry.h"

#include <algorithm>
#include <utility>

namespace pion::server {

void ClientRegistry::Register(net::ClientInfo* c) {
  base::MutexLock lk(&mu_);
  clients_[c->id] = c;
}

void ClientRegistry::Unregister(net::ClientInfo* c) {
  base::MutexLock lk(&mu_);
  clients_.erase(c->id);
  closing_.erase(c->id);
}

void ClientRegistry::SetName(net::ClientInfo* c, std::string name) {
  base::MutexLock lk(&mu_);
  c->name = std::move(name);
}

std::string ClientRegistry::Name(const net::ClientInfo* c) {
  base::MutexLock lk(&mu_);
  return c->name;
}

void ClientRegistry::SetUser(net::ClientInfo* c, std::string user) {
  base::MutexLock lk(&mu_);
  c->user = std::move(user);
}

std::string ClientRegistry::User(const net::ClientInfo* c) {
  base::MutexLock lk(&mu_);
  return c->user;
}

int ClientRegistry::WorkerOf(uint64_t id) {
  base::MutexLock lk(&mu_);
  auto it = clients_.find(id);
  return it == clients_.end() ? -1 : it->second->worker;
}

int ClientRegistry::MarkClosing(uint64_t id) {
  base::MutexLock lk(&mu_);
  auto it = clients_.find(id);
  if (it == clients_.end() || !closing_.insert(id).second) return -1;
  return it->second->worker;
}

bool ClientRegistry::TryAcquireSlot(uint64_t max) {
  uint64_t cur = connected_.load(std::memory_order_relaxed);
  do {
    if (cur >= max) return false;
  } while (!connected_.compare_exchange_weak(cur, cur + 1, std::memory_order_relaxed));
  return true;
}

bool ClientRegistry::ReserveMemory(uint64_t n, uint64_t limit) {
  int64_t cur = memory_.load(std::memory_order_relaxed);
  if (limit > 0 && static_cast<uint64_t>(cur < 0 ? 0 : cur) + n > limit) return false;
  memory_.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  return true;
}

ClientRegistry::Eviction ClientRegistry::PickEvictions(uint64_t limit, uint64_t incoming,
                                                       uint64_t requester,
                                                       std::vector<uint64_t>* out) {
  constexpr auto kR = std::memory_order_relaxed;
  base::MutexLock lk(&mu_);
  uint64_t held = memory() + incoming;  // the requester's growth counted as its own
  std::vector<std::pair<uint64_t, uint64_t>> candidates;  // (tot_mem, id)
  for (auto& [id, c] : clients_) {
    uint64_t mem = c->tot_mem.load(kR) + (id == requester ? incoming : 0);
    if (closing_.count(id) != 0)
      held -= std::min(held, mem);
    else if (mem > 0 && !c->no_evict.load(kR))
      candidates.emplace_back(mem, id);
  }
  if (held <= limit) return Eviction::kFits;
  std::sort(candidates.begin(), candidates.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  size_t first = out->size();
  bool requester_picked = false;
  for (const auto& [mem, id] : candidates) {
    if (held <= limit) break;
    out->push_back(id);
    held -= std::min(held, mem);
    requester_picked = requester_picked || (requester != 0 && id == requester);
  }
  if (held > limit && incoming > 0) {  // a growth that cannot fit anyway: nobody goes for it
    out->resize(first);
    return Eviction::kNoRoom;
  }
  for (size_t i = first; i < out->size(); ++i) closing_.insert((*out)[i]);
  if (requester_picked) return Eviction::kRequesterPicked;
  return held <= limit ? Eviction::kFits : Eviction::kNoRoom;
}

void ClientRegistry::SetLibInfo(net::ClientInfo* c, bool lib_name, std::string value) {
  base::MutexLock lk(&mu_);
  (lib_name ? c->lib_name : c->lib_ver) = std::move(value);
}

}  // namespace pion::server
