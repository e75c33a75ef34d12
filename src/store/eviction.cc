// The LRU and the budgets (sessions, bytes): stamps, removal of a namespace
// from the map and its accounting, and lineage-aware eviction (leaves first,
// least recently used chain first). See store.h.
//
// Namespaces are evicted by sampled LRU, as Redis's evict.c: each eviction
// samples maxmemory-samples leaf namespaces (consecutive buckets of the map from
// a random one; every namespace when there are no more than that), offers
// them to an eviction pool that keeps the kEvictionPoolSize
// oldest seen so far (across evictions), and evicts the pool's oldest after
// re-reading its entries' stamps. A namespace whose last child was evicted is
// offered to the pool at once, so a chain still goes leaf to root. String keys
// keep their exact LRU list (its head is the oldest, O(1)); the victim is the
// older of that head and the pool's oldest namespace (one LRU for both).
#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "base/atomic_raise.h"
#include "base/check.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

namespace {

bool IsLeaf(const Namespace& n) { return n.children.empty() && n.pending_children == 0; }

}  // namespace

bool Store::OfferToPoolLocked(const NsPtr& n, const Namespace* keep) {
  if (n.get() == keep || n->dropped || !RamCandidateLocked(*n)) return false;
  evict_pool_.Offer(n, n->stamp.load(std::memory_order_relaxed), n->depth);
  return true;
}

void Store::SampleLeavesLocked(const Namespace* keep) {
  const size_t k = std::max<uint32_t>(1, cfg_.eviction_samples);
  if (NsCountLocked() <= k) {
    // No more namespaces than the sample: all of them (exact LRU).
    for (Shard& sh : ks_.shards())
      for (auto& [name, n] : ks_.MapOf(sh)) OfferToPoolLocked(n, keep);
    return;
  }
  // k leaves from consecutive buckets after a random one, visiting at most
  // 10 * k buckets (as Redis's dictGetSomeKeys; each bucket once). Only leaves
  // count, since interior namespaces are never candidates: a map of a few long
  // chains still samples its few leaves.
  rand_state_ ^= rand_state_ << 13, rand_state_ ^= rand_state_ >> 7,
      rand_state_ ^= rand_state_ << 17;
  // The buckets of the shards' maps, one after the other, as one table.
  const size_t nb = ks_.NamespaceBucketsLocked();
  Keyspace::BucketPos p = ks_.NamespaceBucketLocked(static_cast<size_t>(rand_state_ % nb));
  const size_t steps = std::min(10 * k, nb);
  size_t leaves = 0;
  for (size_t step = 0; step < steps && leaves < k; ++step, ks_.NextNamespaceBucketLocked(&p)) {
    NsMap& m = ks_.MapOf(ks_.shard(p.shard));
    for (auto it = m.begin(p.bucket); it != m.end(p.bucket) && leaves < k; ++it)
      if (OfferToPoolLocked(it->second, keep)) ++leaves;
  }
}

NsPtr Store::OldestPooledLeafLocked(const Namespace* keep) {
  SampleLeavesLocked(keep);
  for (int pass = 0; pass < 2; ++pass) {
    // Re-read the entries: drop the gone, held and no-longer-leaf ones, take
    // touches since they were pooled into account.
    evict_pool_.Refresh([&](const NsPtr& n) -> std::optional<uint64_t> {
      ks_.mu.AssertHeld();  // the caller's (the analysis does not see into the lambda)
      if (n->dropped || n.get() == keep || !RamCandidateLocked(*n)) return std::nullopt;
      return n->stamp.load(std::memory_order_relaxed);
    });
    if (!evict_pool_.empty()) break;
    // The sample held no leaf (a map of interior namespaces): look at them all
    // once, so eviction never fails while a leaf exists.
    if (pass == 0)
      for (Shard& sh : ks_.shards())
        for (auto& [name, n] : ks_.MapOf(sh)) OfferToPoolLocked(n, keep);
  }
  return evict_pool_.Oldest();
}

void Store::EvictedFromPoolLocked(const NsPtr& victim, const Namespace* keep) {
  evict_pool_.Remove(victim.get());
  // Its parent is a candidate once its last child is gone (the chain goes leaf to root).
  if (Namespace* p = victim->parent.get()) {
    const NsPtr* it = NsRefLocked(p->name);
    if (it != nullptr && it->get() == p) OfferToPoolLocked(*it, keep);
  }
}

void Store::Touch(Namespace& n) {
  const uint64_t s = ks_.NextStamp();
  // The chain is fixed at creation and its length bounded by max_chain.
  // Stamps only grow: a parent touched through two children keeps the later touch.
  for (Namespace* p = &n; p != nullptr; p = p->parent.get())
    base::AtomicRaise(&p->stamp, s, std::memory_order_relaxed);
}

Status Store::RemoveLocked(const NsPtr& n, DropReason reason, uint64_t* lsn) {
  PION_RETURN_IF_ERROR(LogLocked(persist::DropRec{n->name, n->incarnation, reason}, lsn));
  if (observer_) observer_->OnNamespaceRemoved(n->name);
  if (block_observer_ && n->blocks && !n->blocks->hashes.empty())
    block_observer_->OnBlocksRemoved(*n->blocks);
  if (Namespace* p = n->parent.get()) {
    auto it = std::find(p->children.begin(), p->children.end(), n.get());
    if (it != p->children.end()) p->children.erase(it);
  }
  {
    Shard& sh = ks_.ShardFor(n->name);
    base::MutexLock sl(&sh.mu);
    sh.map.erase(n->name);
  }
  n->dropped = true;
  bytes_ -= n->bytes - n->tier_uncharged;  // a namespace on disk charged only its table
  if (n->tiered) {
    tier_uncharged_ -= n->tier_uncharged;
    --tier_entries_;
  }
  if (reason == DropReason::kEviction) evictions_ += 2;
  if (observer_) observer_->OnNamespaceGone(n->name, reason == DropReason::kEviction);
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
      const NsPtr* it = NsRefLocked(c->name);
      PION_CHECK(it != nullptr && it->get() == c);
      stack.push_back(*it);
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
  // Leaves only: `keep`'s ancestors have a live child (keep) and are never taken.
  while (!fits()) {
    NsPtr victim = OldestPooledLeafLocked(keep);
    if (!victim) return Status::OutOfBudget("");
    if (IsLeaf(*victim)) {
      PION_RETURN_IF_ERROR(RemoveLocked(victim, DropReason::kEviction, lsn));
    } else {  // every child on disk: the subtree goes, leaves first
      uint64_t removed = 0;
      PION_RETURN_IF_ERROR(RemoveSubtreeLocked(victim, DropReason::kEviction, lsn, &removed));
    }
    EvictedFromPoolLocked(victim, keep);
  }
  return Status::OK();
}

Status Store::EvictLocked(const Namespace* keep, const std::function<bool()>& fits, uint64_t* lsn,
                          std::string_view keep_key, bool keep_key_set) {
  // Pinned keys, blocks with a live child (leaves go first) and keys held by
  // a CHAIN being written are never string candidates.
  // With a disk tier, a block whose children are all on disk may move there
  // too (it is never removed while it has children).
  auto is_kept = [&](const StrEntry* e) REQUIRES(ks_.mu) {
    return (EvictionExempt(*e) && !TierMovableLocked(*e)) || (keep_key_set && *e->key == keep_key);
  };
  while (!fits()) {
    if (policy_ == EvictPolicy::kNoEviction) return Status::OutOfBudget("");
    StrEntry* sv = nullptr;
    NsPtr nv;
    if (policy_ == EvictPolicy::kAllKeysRandom) {
      const uint64_t nstr = StrCountLocked();
      uint64_t total = nstr + NsCountLocked();
      if (total == 0) break;
      rand_state_ ^= rand_state_ << 13, rand_state_ ^= rand_state_ >> 7,
          rand_state_ ^= rand_state_ << 17;
      uint64_t r = rand_state_ % total;
      if (r < nstr) {
        // A random bucket (of the shards' tables, one after the other), then
        // the first key from it on.
        const size_t nb = ks_.StringBucketsLocked();
        Keyspace::BucketPos p = ks_.StringBucketLocked(static_cast<size_t>(rand_state_ >> 20) % nb);
        for (size_t k = 0; k < nb && sv == nullptr; ++k, ks_.NextStringBucketLocked(&p)) {
          StrMap& m = ks_.StringsOf(ks_.shard(p.shard));
          for (auto it = m.begin(p.bucket); it != m.end(p.bucket); ++it)
            if (!is_kept(&it->second)) {
              sv = &it->second;
              break;
            }
        }
      } else {
        // A random namespace among the leaves (lineage: never one with children).
        for (Shard& sh : ks_.shards()) {
          for (auto& [name, n] : ks_.MapOf(sh))
            if (n.get() != keep && IsLeaf(*n)) {
              nv = n;
              if (r-- == nstr) break;
            }
          if (r + 1 == nstr) break;
        }
      }
      if (sv == nullptr && !nv) {
        // Only kept keys left on the side drawn: try the other.
        for (Shard& sh : ks_.shards())
          for (auto& [name, n] : ks_.MapOf(sh))
            if (n.get() != keep && IsLeaf(*n)) nv = n;
        if (!nv)
          for (Shard& sh : ks_.shards()) {
            base::MutexLock sl(&sh.mu);
            for (StrEntry* e = sh.lru_head; e != nullptr && sv == nullptr; e = e->next)
              if (!is_kept(e)) sv = e;
            if (sv != nullptr) break;
          }
      }
    } else if (policy_ == EvictPolicy::kVolatileRandom || policy_ == EvictPolicy::kVolatileTtl ||
               IsLfuPolicy(policy_)) {
      const bool volatile_only = policy_ != EvictPolicy::kAllKeysLfu;
      sv = SampleStringVictimLocked(volatile_only, is_kept);
      // Namespaces have no access counter: allkeys-lfu takes the least
      // recently used one once no string key can go.
      if (sv == nullptr && !volatile_only) nv = OldestPooledLeafLocked(keep);
    } else {
      bool volatile_only = policy_ == EvictPolicy::kVolatileLru;
      // The oldest string key: the oldest of the shards' list heads (a read
      // touches an entry under its shard lock only, so each list is read under it).
      uint64_t sv_stamp = 0;
      for (Shard& sh : ks_.shards()) {
        base::MutexLock sl(&sh.mu);
        for (StrEntry* e = sh.lru_head; e != nullptr; e = e->next)
          if (!is_kept(e) && (!volatile_only || e->expire_at_ms != 0)) {
            if (sv == nullptr || e->stamp < sv_stamp) {
              sv = e;
              sv_stamp = e->stamp;
            }
            break;
          }
      }
      if (!volatile_only) {
        // The pool's oldest leaf (the deeper one on a tie): a chain goes leaf
        // to root, `keep`'s ancestors never (they have a child).
        nv = OldestPooledLeafLocked(keep);
        if (nv && sv != nullptr) {
          if (sv_stamp < nv->stamp.load(std::memory_order_relaxed))
            nv.reset();
          else
            sv = nullptr;
        }
      }
    }
    if (sv != nullptr) {
      // To the disk tier when it takes the value (not an eviction: nothing leaves pion).
      if (TierMoveLocked(*sv, lsn)) continue;
      if (EvictionExempt(*sv)) break;  // chosen to move, and the tier could not take it
      PION_RETURN_IF_ERROR(StrRemoveLocked(*sv, 1, lsn));
      ++evicted_strings_;
    } else if (nv) {
      // To the disk tier when it takes the namespace (not an eviction).
      if (TierMoveNamespaceLocked(nv, lsn)) {
        EvictedFromPoolLocked(nv, keep);
        continue;
      }
      if (!IsLeaf(*nv)) break;  // chosen to move, and the tier could not take it
      PION_RETURN_IF_ERROR(RemoveLocked(nv, DropReason::kEviction, lsn));
      EvictedFromPoolLocked(nv, keep);
    } else {
      break;
    }
  }
  return fits() ? Status::OK() : Status::OutOfBudget("");
}

StrEntry* Store::SampleStringVictimLocked(bool volatile_only,
                                          const std::function<bool(const StrEntry*)>& is_kept) {
  const size_t nb = ks_.StringBucketsLocked();
  if (nb == 0 || StrCountLocked() == 0) return nullptr;
  rand_state_ ^= rand_state_ << 13, rand_state_ ^= rand_state_ >> 7,
      rand_state_ ^= rand_state_ << 17;
  // A random bucket of the shards' tables (one after the other), and on from it.
  const Keyspace::BucketPos start =
      ks_.StringBucketLocked(static_cast<size_t>(rand_state_ >> 20) % nb);
  size_t g = start.bucket, si = start.shard;
  const size_t want = std::max<uint32_t>(1, cfg_.eviction_samples);
  const bool lfu = IsLfuPolicy(policy_), ttl = policy_ == EvictPolicy::kVolatileTtl;
  StrEntry* best = nullptr;
  int64_t best_score = 0;
  size_t seen = 0, visited = 0;
  while (visited < nb && seen < want) {
    Shard& sh = ks_.shard(si);
    base::MutexLock sl(&sh.mu);
    StrMap& m = sh.strings;
    for (; g < m.bucket_count() && visited < nb && seen < want; ++g, ++visited) {
      for (auto it = m.begin(g); it != m.end(g) && seen < want; ++it) {
        StrEntry* e = &it->second;
        if (is_kept(e) || (volatile_only && e->expire_at_ms == 0)) continue;
        ++seen;
        // Lower is evicted first: the LFU counter, the expiry time; random: the first.
        const int64_t score = lfu ? ks_.LfuDecayed(*e) : ttl ? e->expire_at_ms : 0;
        if (best == nullptr || score < best_score) {
          best = e;
          best_score = score;
        }
        if (!lfu && !ttl) return best;
      }
    }
    g = 0;
    si = (si + 1) % kShards;
  }
  return best;
}

Status Store::SetMaxBytes(uint64_t max_bytes, uint64_t* lsn) {
  *lsn = 0;
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  cfg_.max_bytes = max_bytes;
  if (max_bytes == 0) return Status::OK();
  Status st = EvictLocked(
      nullptr, [&]() REQUIRES(ks_.mu) { return bytes_ <= max_bytes; }, lsn);
  // As Redis: a budget the policy cannot reach now (noeviction, nothing left
  // to evict) still stands; writes that need room are refused until it is met.
  return st.code() == Code::kOutOfBudget ? Status::OK() : st;
}

void Store::SetEvictionSamples(uint32_t n) {
  base::MutexLock l(&ks_.mu);
  cfg_.eviction_samples = std::max<uint32_t>(1, n);
}

bool Store::OutOfMemory(uint64_t* lsn) {
  *lsn = 0;
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  const uint64_t max = cfg_.max_bytes;
  if (max == 0) return false;
  return !EvictLocked(
              nullptr,
              [&]() REQUIRES(ks_.mu) {
                return max >= kStrEntryOverhead && bytes_ <= max - kStrEntryOverhead;
              },
              lsn)
              .ok();
}

uint64_t Store::used_bytes() const {
  base::MutexLock l(&ks_.mu);
  return bytes_;
}

uint64_t Store::max_bytes() const {
  base::MutexLock l(&ks_.mu);
  return cfg_.max_bytes;
}

}  // namespace pion::store
