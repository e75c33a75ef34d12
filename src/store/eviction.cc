// The LRU and the budgets (sessions, bytes): stamps, removal of a namespace
// from the map and its accounting, and lineage-aware eviction (leaves first,
// least recently used chain first). See store.h.
#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "base/check.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

namespace {

// Raises `stamp` to `s` unless it is already higher (stamps only grow, so a
// parent touched through two children keeps the later touch).
void RaiseStamp(std::atomic<uint64_t>& stamp, uint64_t s) {
  uint64_t cur = stamp.load(std::memory_order_relaxed);
  while (cur < s && !stamp.compare_exchange_weak(cur, s, std::memory_order_relaxed)) {
  }
}

// An eviction candidate: a namespace with no live child. The heap's top is the
// oldest stamp, the deeper namespace on a tie.
struct Candidate {
  uint64_t stamp;
  uint32_t depth;
  Namespace* n;
};

bool Younger(const Candidate& a, const Candidate& b) {
  if (a.stamp != b.stamp) return a.stamp > b.stamp;
  return a.depth < b.depth;
}

bool IsLeaf(const Namespace& n) { return n.children.empty() && n.pending_children == 0; }

}  // namespace

void Store::Touch(Namespace& n) {
  const uint64_t s = lru_clock_.fetch_add(1, std::memory_order_relaxed) + 1;
  // The chain is fixed at creation and its length bounded by max_chain.
  for (Namespace* p = &n; p != nullptr; p = p->parent.get()) RaiseStamp(p->stamp, s);
}

Status Store::RemoveLocked(const NsPtr& n, DropReason reason, uint64_t* lsn) {
  if (sink_) {
    auto r = sink_->OnDrop(n->name, n->incarnation, reason);
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  if (observer_) observer_->OnNamespaceRemoved(n->name);
  if (Namespace* p = n->parent.get()) {
    auto it = std::find(p->children.begin(), p->children.end(), n.get());
    if (it != p->children.end()) p->children.erase(it);
  }
  map_.erase(n->name);
  n->dropped = true;
  bytes_ -= n->bytes;
  if (reason == DropReason::kEviction) evictions_ += 2;
  return Status::OK();
}

Status Store::RemoveSubtreeLocked(const NsPtr& root, DropReason reason, uint64_t* lsn,
                                  uint64_t* removed) {
  // Post-order without recursion: a namespace is removed once it has no child left.
  std::vector<NsPtr> stack{root};
  while (!stack.empty()) {
    NsPtr n = stack.back();
    if (!n->children.empty()) {
      Namespace* c = n->children.back();
      auto it = map_.find(c->name);
      PION_CHECK(it != map_.end() && it->second.get() == c);
      stack.push_back(it->second);
      continue;
    }
    stack.pop_back();
    PION_RETURN_IF_ERROR(RemoveLocked(n, reason, lsn));
    ++*removed;
  }
  return Status::OK();
}

Status Store::EvictNamespacesLocked(const Namespace* keep, const std::function<bool()>& fits,
                                    uint64_t* lsn) {
  if (fits()) return Status::OK();
  // Leaves only: `keep`'s ancestors have a live child (keep) and are never taken.
  std::vector<Candidate> heap;
  heap.reserve(map_.size());
  for (auto& [name, n] : map_)
    if (n.get() != keep && IsLeaf(*n))
      heap.push_back({n->stamp.load(std::memory_order_relaxed), n->depth, n.get()});
  std::make_heap(heap.begin(), heap.end(), Younger);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Younger);
    Namespace* victim = heap.back().n;
    heap.pop_back();
    auto it = map_.find(victim->name);
    PION_CHECK(it != map_.end() && it->second.get() == victim);
    NsPtr n = it->second;
    PION_RETURN_IF_ERROR(RemoveLocked(n, DropReason::kEviction, lsn));
    if (fits()) return Status::OK();
    // Its parent is a candidate once its last child is gone.
    Namespace* p = n->parent.get();
    if (p != nullptr && p != keep && !p->dropped && IsLeaf(*p)) {
      heap.push_back({p->stamp.load(std::memory_order_relaxed), p->depth, p});
      std::push_heap(heap.begin(), heap.end(), Younger);
    }
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
        // A random namespace among the leaves (lineage: never one with children).
        for (auto& [name, n] : map_)
          if (n.get() != keep && IsLeaf(*n)) {
            nv = n;
            if (r-- == strings_.size()) break;
          }
      }
      if (sv == nullptr && !nv) {
        // Only kept keys left on the side drawn: try the other.
        for (auto& [name, n] : map_)
          if (n.get() != keep && IsLeaf(*n)) nv = n;
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
        // The oldest leaf (the deeper one on a tie): a chain goes leaf to
        // root, `keep`'s ancestors never (they have a child).
        uint64_t best = UINT64_MAX;
        uint32_t best_depth = 0;
        for (auto& [name, n] : map_) {
          if (n.get() == keep || !IsLeaf(*n)) continue;
          uint64_t st = n->stamp.load(std::memory_order_relaxed);
          if (st < best || (st == best && n->depth > best_depth))
            best = st, best_depth = n->depth, nv = n;
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
