// The LRU and the budgets (sessions, bytes): stamps, removal of a namespace
// from the map and its accounting, and eviction in stamp order. See store.h.
#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

void Store::Touch(Namespace& n) {
  n.stamp.store(lru_clock_.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

Status Store::RemoveLocked(const NsPtr& n, DropReason reason, uint64_t* lsn) {
  if (sink_) {
    auto r = sink_->OnDrop(n->name, n->incarnation, reason);
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  if (observer_) observer_->OnNamespaceRemoved(n->name);
  map_.erase(n->name);
  n->dropped = true;
  bytes_ -= n->bytes;
  if (reason == DropReason::kEviction) evictions_ += 2;
  return Status::OK();
}

Status Store::EvictLocked(const Namespace* keep, const std::function<bool()>& fits, uint64_t* lsn) {
  if (fits()) return Status::OK();
  std::vector<std::pair<uint64_t, NsPtr>> order;
  order.reserve(map_.size());
  for (auto& [name, n] : map_)
    if (n.get() != keep) order.emplace_back(n->stamp.load(std::memory_order_relaxed), n);
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [stamp, n] : order) {
    PION_RETURN_IF_ERROR(RemoveLocked(n, DropReason::kEviction, lsn));
    if (fits()) return Status::OK();
  }
  return Status::OutOfBudget("");
}

Status Store::SetMaxBytes(uint64_t max_bytes, uint64_t* lsn) {
  *lsn = 0;
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  cfg_.max_bytes = max_bytes;
  if (max_bytes == 0) return Status::OK();
  return EvictLocked(
      nullptr, [&] { return bytes_ <= max_bytes; }, lsn);
}

uint64_t Store::max_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return cfg_.max_bytes;
}

}  // namespace pion::store
