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

Status Store::EvictNamespacesLocked(const Namespace* keep, const std::function<bool()>& fits,
                                    uint64_t* lsn) {
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

Status Store::EvictLocked(const Namespace* keep, const std::function<bool()>& fits, uint64_t* lsn,
                          std::string_view keep_key, bool keep_key_set) {
  auto is_kept = [&](const StrEntry* e) { return keep_key_set && *e->key == keep_key; };
  while (!fits()) {
    if (policy_ == EvictPolicy::kNoEviction) return Status::OutOfBudget("");
    StrEntry* sv = nullptr;
    NsPtr nv;
    if (policy_ == EvictPolicy::kAllKeysRandom) {
      uint64_t total = strings_.size() + map_.size();
      if (total == 0) break;
      rand_state_ ^= rand_state_ << 13, rand_state_ ^= rand_state_ >> 7,
          rand_state_ ^= rand_state_ << 17;
      uint64_t r = rand_state_ % total;
      if (r < strings_.size()) {
        // A random bucket, then the first key from it on.
        size_t nb = strings_.bucket_count();
        size_t b0 = static_cast<size_t>(rand_state_ >> 20) % nb;
        for (size_t k = 0; k < nb && sv == nullptr; ++k) {
          size_t b = (b0 + k) % nb;
          for (auto it = strings_.begin(b); it != strings_.end(b); ++it)
            if (!is_kept(&it->second)) {
              sv = &it->second;
              break;
            }
        }
      } else {
        for (auto& [name, n] : map_)
          if (n.get() != keep) {
            nv = n;
            if (r-- == strings_.size()) break;
          }
      }
      if (sv == nullptr && !nv) {
        // Only kept keys left on the side drawn: try the other.
        for (auto& [name, n] : map_)
          if (n.get() != keep) nv = n;
        if (!nv)
          for (StrEntry* e = lru_head_; e != nullptr; e = e->next)
            if (!is_kept(e)) {
              sv = e;
              break;
            }
      }
    } else {
      bool volatile_only = policy_ == EvictPolicy::kVolatileLru;
      for (StrEntry* e = lru_head_; e != nullptr; e = e->next)
        if (!is_kept(e) && (!volatile_only || e->expire_at_ms != 0)) {
          sv = e;
          break;
        }
      if (!volatile_only) {
        uint64_t best = UINT64_MAX;
        for (auto& [name, n] : map_) {
          if (n.get() == keep) continue;
          uint64_t st = n->stamp.load(std::memory_order_relaxed);
          if (st < best) best = st, nv = n;
        }
        if (nv && sv != nullptr) {
          if (sv->stamp < best)
            nv.reset();
          else
            sv = nullptr;
        }
      }
    }
    if (sv != nullptr) {
      PION_RETURN_IF_ERROR(StrRemoveLocked(strings_.find(*sv->key), 1, lsn));
      ++evicted_strings_;
    } else if (nv) {
      PION_RETURN_IF_ERROR(RemoveLocked(nv, DropReason::kEviction, lsn));
    } else {
      break;
    }
  }
  return fits() ? Status::OK() : Status::OutOfBudget("");
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
