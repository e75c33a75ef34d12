#include "server/durability_gate.h"

#include <algorithm>

#include "base/atomic_raise.h"
#include "net/connection.h"
#include "net/event_loop.h"

namespace pion::server {

void DurabilityGate::NotifyDurable(uint64_t lsn) {
  base::AtomicRaise(&durable_lsn_, lsn);
  base::MutexLock lk(&mu_);
  for (HeldReplies* h : watchers_) h->Wake(lsn);
}

void DurabilityGate::Watch(HeldReplies* h) {
  base::MutexLock lk(&mu_);
  watchers_.push_back(h);
}

void HeldReplies::Hold(net::Connection* c, uint64_t lsn) {
  waiting_.insert(c);
  uint64_t cur = min_wait_lsn_.load(std::memory_order_relaxed);
  // seq_cst on both sides (here: store min, load durable; NotifyDurable: store
  // durable, load min in Wake) so that at least one of the two sees the other.
  if (lsn < cur) min_wait_lsn_.store(lsn, std::memory_order_seq_cst);
  if (gate_.durable_lsn() >= lsn) loop_.Defer([this] { Release(); });
}

void HeldReplies::Wake(uint64_t durable_lsn) {
  if (min_wait_lsn_.load(std::memory_order_seq_cst) > durable_lsn) return;
  loop_.Post([this] { Release(); });
}

void HeldReplies::Release() {
  uint64_t durable = gate_.durable_lsn();
  uint64_t min_left = UINT64_MAX;
  std::vector<net::Connection*> ready;
  for (net::Connection* c : waiting_) {
    uint64_t h = c->hold_lsn();
    if (h <= durable)
      ready.push_back(c);
    else
      min_left = std::min(min_left, h);
  }
  for (net::Connection* c : ready) waiting_.erase(c);
  min_wait_lsn_.store(min_left, std::memory_order_seq_cst);
  for (net::Connection* c : ready) c->OnDurable();  // may hold again for a later LSN
}

}  // namespace pion::server
