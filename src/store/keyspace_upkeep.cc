// The keyspace's upkeep: DBSIZE, active expiry, the keyspace counters (INFO
// keyspace and stats) and the eviction policy. The operations on keys are
// free functions over the keyspace (store/key_ops.h, store/string_ops.h).
#include <mutex>
#include <shared_mutex>

#include "base/clock.h"
#include "store/expiry.h"
#include "store/store.h"

namespace pion::store {

uint64_t Store::DbSize() const {
  base::MutexLock l(&ks_.mu);
  return StrCountLocked() + NsCountLocked();
}

uint64_t Store::ExpireActive(uint64_t max_keys) {
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  int64_t now = UnixMillis();
  uint64_t n = 0, unused = 0;
  ReleaseDueLeasesLocked(now, &unused);
  // Pinned keys stay (they expire when their last pin ends): passed over.
  uint64_t looked = 0;
  for (auto it = ks_.expiry_order().begin(); n < max_keys && looked < 4 * max_keys + 16 &&
                                             it != ks_.expiry_order().end() && it->first <= now;
       ++looked) {
    StrEntry* e = it->second;
    ++it;
    if (e->pins > 0) continue;
    if (!StrRemoveLocked(*e, 2, &unused).ok()) break;
    ++n;
  }
  return n;
}

KeyspaceStats Store::KeyStats() const {
  KeyspaceStats s;
  base::MutexLock l(&ks_.mu);
  s.keys = StrCountLocked() + NsCountLocked();
  s.expires = ks_.expiry_order().size();
  if (!ks_.expiry_order().empty()) {
    int64_t avg = ks_.MeanExpireMsLocked() - UnixMillis();
    s.avg_ttl_ms = avg > 0 ? static_cast<uint64_t>(avg) : 0;
  }
  s.string_bytes = str_bytes_;
  for (const Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    s.hits += sh.hits;
    s.misses += sh.misses;
  }
  s.expired = expired_keys_;
  s.evicted_keys = evicted_strings_ + evictions_ / 2;
  s.changes = ks_.ChangesLocked();
  return s;
}

void Store::ResetKeyStats() {
  base::MutexLock l(&ks_.mu);
  expired_keys_ = 0;
  for (Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    sh.hits = sh.misses = 0;
  }
}

void Store::SetEvictPolicy(EvictPolicy p) {
  base::MutexLock l(&ks_.mu);
  policy_ = p;
}

EvictPolicy Store::evict_policy() const {
  base::MutexLock l(&ks_.mu);
  return policy_;
}

}  // namespace pion::store
