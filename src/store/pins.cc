// KV.BLOCK.MATCH and its pins (docs/protocol.md "Blocks", store.h "Blocks").
//
// A lease pins the keys one MATCH ... PIN counted until its deadline or
// KV.BLOCK.UNPIN. Pins live on the entries themselves (StrEntry::pins, written
// under ks_.mu and the entry's shard lock, so a reader's expiry test under the
// shard lock sees them); a lease holds (entry, born) pairs in one vector (no
// allocation per key). An entry that leaves the map while pinned (DEL,
// overwrite by RENAME, eviction cannot happen) moves its pin count to the
// lease table's dead pins under its `born`, so a lease never touches a freed
// entry: it looks there first. FLUSHALL ends every pin at once (the table's
// epoch; store/lease_table.h keeps the leases and the counts). Leases end
// at their deadline through ReleaseDueLeasesLocked, which the active expiry
// cycle calls (ExpireActive), so a client that dies leaks nothing.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/check.h"
#include "base/clock.h"
#include "base/keyslot.h"
#include "store/expiry.h"
#include "store/store.h"

namespace pion::store {

namespace {

// a == b, inline: 16 bytes a compare (SSE2, in every x86-64) where a library
// memcmp call costs more than comparing a 64-byte block name.
inline bool SameKey(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
#if defined(__SSE2__)
  size_t i = 0;
  for (; i + 16 <= a.size(); i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.data() + i));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.data() + i));
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) != 0xffff) return false;
  }
  return i == a.size() || std::memcmp(a.data() + i, b.data() + i, a.size() - i) == 0;
#else
  return a == b;
#endif
}

}  // namespace

void Store::PinEntryLocked(StrEntry& e) {
  {
    Shard& sh = ks_.ShardFor(*e.key);
    base::MutexLock sl(&sh.mu);
    ++e.pins;
  }
  if (e.pins == 1) leases_.KeyPinned(StrCharge(*e.key, e.value));
}

void Store::PinnedChargeChangedLocked(const StrEntry& e, uint64_t old_charge, uint64_t new_charge) {
  (void)e;
  leases_.ChargeChanged(old_charge, new_charge);
}

void Store::UnpinEntryLocked(StrEntry* e, uint64_t born, uint64_t* lsn) {
  // Not dead: the entry is still in the map (every removal of a pinned entry
  // records it as dead first).
  if (leases_.TakeDeadPin(born)) return;
  PION_DCHECK(e->born == born && e->pins > 0);
  {
    Shard& sh = ks_.ShardFor(*e->key);
    base::MutexLock sl(&sh.mu);
    --e->pins;
  }
  if (e->pins > 0) return;
  leases_.KeyUnpinned(StrCharge(*e->key, e->value));
  // Its time passed while it was pinned: it expires now (logged, as any expiry).
  if (PastDue(*e, UnixMillis())) (void)StrRemoveLocked(*e, 2, lsn);
}

void Store::EndLeaseLocked(uint64_t id, uint64_t* lsn) {
  std::optional<PinLease> lease = leases_.Take(id);
  if (!lease || !leases_.current(*lease)) return;  // none, or a FLUSHALL since: it pins nothing
  for (auto& [e, born] : lease->keys) UnpinEntryLocked(e, born, lsn);
}

void Store::ReleaseDueLeasesLocked(int64_t now_ms, uint64_t* lsn) {
  for (uint64_t id; (id = leases_.FirstDue(now_ms)) != 0;) EndLeaseLocked(id, lsn);
}

void Store::ForgetBlockStateLocked(StrEntry& e) {
  if (e.pins > 0) {
    leases_.RecordDead(e.born, e.pins);
    leases_.KeyUnpinned(StrCharge(*e.key, e.value));
    Shard& sh = ks_.ShardFor(*e.key);
    base::MutexLock sl(&sh.mu);
    e.pins = 0;
  }
  if (e.block) {
    if (e.block->has_hash && block_observer_ != nullptr)
      block_observer_->OnBlockKeyRemoved(e.block->hash);
    // Its children become roots; it leaves its parent's children.
    for (StrEntry* c : e.block->children) {
      Shard& csh = ks_.ShardFor(*c->key);
      base::MutexLock sl(&csh.mu);
      c->block->parent = nullptr;
    }
    e.block->children.clear();
    UnlinkParentLocked(e);
  }
}

Store::BlockMatchResult Store::BlockMatch(std::span<const std::string_view> keys, uint8_t* bitmap,
                                          int64_t pin_ms, std::string_view user) {
  // BlockMatchSimple's rules, made cheap per key: each key is hashed once, a
  // chunk at a time, and that hash gives both its shard (ShardOfHash; a key
  // with a hash tag hashes the tag for its shard) and its bucket; the string
  // map compares cached hashes before keys (StrHash), and under ks_.mu a block
  // whose parent is the key counted just before it skips the ancestor walk
  // (that key's walk stamped them already).
  BlockMatchResult out;
  const size_t n = keys.size();
  const int64_t now = UnixMillis();
  const uint64_t stamp = ks_.NextStamp();  // one stamp for every key counted
  size_t hash[kMatchChunk];
  uint8_t shard_ix[kMatchChunk];
  // The chunk's hashes and shards.
  auto hash_chunk = [&](size_t base, size_t m) {
    for (size_t j = 0; j < m; ++j) {
      const std::string_view k = keys[base + j];
      hash[j] = StrHash{}(k);
      shard_ix[j] = static_cast<uint8_t>(Keyspace::ShardIndex(k, hash[j]));
    }
  };
  auto shard_of = [&](size_t j) -> Shard& { return ks_.shard(shard_ix[j]); };
  if (pin_ms <= 0) {
    // The read path: one shard lock at a time. An expired key, or a counted
    // block with a parent (ancestors to stamp), sends the call to the path
    // under ks_.mu below, which starts over.
    bool slow = false, stop = false;
    static_assert(kShards <= 32, "a chunk's shards fit a 32-bit mask");
    for (size_t base = 0; base < n && !slow && !stop; base += kMatchChunk) {
      const size_t m = std::min(kMatchChunk, n - base);
      hash_chunk(base, m);
      // The chunk's shards are locked together, in shard order: one lock per
      // shard per chunk instead of one per key. Every other path holds at most
      // one shard lock at a time (and takes none of ks_.mu under it), so this
      // order cannot deadlock with them.
      uint32_t mask = 0;
      for (size_t j = 0; j < m; ++j) mask |= 1u << shard_ix[j];
      struct ChunkLocks {
        Shard* shards;
        uint32_t mask;
        ChunkLocks(Shard* s, uint32_t k) NO_THREAD_SAFETY_ANALYSIS : shards(s), mask(k) {
          for (uint32_t b = mask; b != 0; b &= b - 1) shards[__builtin_ctz(b)].mu.Lock();
        }
        ~ChunkLocks() NO_THREAD_SAFETY_ANALYSIS {
          for (uint32_t b = mask; b != 0; b &= b - 1) shards[__builtin_ctz(b)].mu.Unlock();
        }
      } locks(ks_.shards().data(), mask);
      // The chunk's lookups in passes over its keys, so that their cache misses
      // overlap instead of following one another: each key's slot in its
      // shard's flat index (StrIndex: its address follows from the hash),
      // then the entry it names, then that entry's key bytes, each prefetched
      // a pass before it is read; the walks proper, in key order, then mostly
      // hit the cache. Nothing is inserted or erased under these locks, so
      // what the passes found stays.
      StrEntry* found[kMatchChunk];
      // (AssertHeld: the analysis cannot follow ChunkLocks's mask.)
      for (size_t j = 0; j < m; ++j) {
        Shard& sh = shard_of(j);
        sh.mu.AssertHeld();
        __builtin_prefetch(sh.index.Home(hash[j]));
      }
      // The first entry under each key's hash (another key with the same
      // 64-bit hash is all but impossible; the walk below checks), and the
      // entry's fields read below (its key, expiry, links, stamp, list).
      for (size_t j = 0; j < m; ++j) {
        Shard& sh = shard_of(j);
        sh.mu.AssertHeld();
        found[j] = sh.index.Find(hash[j], [](const StrEntry*) { return true; });
        if (found[j] == nullptr) continue;
        __builtin_prefetch(&found[j]->key);
        __builtin_prefetch(&found[j]->block);
      }
      for (size_t j = 0; j < m; ++j) {
        if (found[j] == nullptr) continue;
        // The key's bytes (a 64-byte name spans two lines).
        const std::string& k = *found[j]->key;
        __builtin_prefetch(k.data());
        __builtin_prefetch(k.data() + k.size() - 1);
      }
      for (size_t j = 0; j < m; ++j) {
        const size_t i = base + j;
        Shard& sh = shard_of(j);
        sh.mu.AssertHeld();
        StrEntry* f = found[j];
        if (f != nullptr && !SameKey(*f->key, keys[i]))
          f = sh.index.Find(hash[j], [&](const StrEntry* x) { return SameKey(*x->key, keys[i]); });
        PION_DCHECK((f == nullptr) == (sh.strings.find(keys[i]) == sh.strings.end()));
        if (f == nullptr) {
          if (bitmap == nullptr) {
            stop = true;
            break;
          }
          continue;
        }
        StrEntry& e = *f;
        if ((e.expire_at_ms != 0 && Expired(e, now)) || e.HasParent()) {
          slow = true;
          break;
        }
        e.stamp = stamp;
        sh.MoveToTail(e);
        ++out.count;
        if (bitmap != nullptr) bitmap[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
      }
    }
    if (!slow) return out;
    out.count = 0;
    if (bitmap != nullptr) std::memset(bitmap, 0, (n + 7) / 8);
  }
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  ReleaseDueLeasesLocked(now, &unused);
  bool pin = pin_ms > 0;
  if (pin && leases_.full()) {
    out.too_many_leases = true;
    pin = false;
  }
  PinLease lease;
  const StrEntry* counted = nullptr;  // the key counted last (its ancestors are stamped)
  bool stop = false;
  for (size_t base = 0; base < n && !stop; base += kMatchChunk) {
    const size_t m = std::min(kMatchChunk, n - base);
    hash_chunk(base, m);
    for (size_t j = 0; j < m; ++j) {
      const size_t i = base + j;
      Shard& sh = shard_of(j);
      // StrFindLocked with the shard known: an expired key is removed, missing.
      StrEntry* e = ks_.IndexOf(sh).Find(
          hash[j], [&](const StrEntry* x) { return SameKey(*x->key, keys[i]); });
      if (e != nullptr && Expired(*e, now)) {
        (void)StrRemoveLocked(*e, 2, &unused);  // a failed log write keeps it (still expired)
        e = nullptr;
      }
      if (e == nullptr) {
        if (bitmap == nullptr) {
          stop = true;
          break;
        }
        continue;
      }
      {
        base::MutexLock sl(&sh.mu);
        e->stamp = stamp;
        sh.MoveToTail(*e);
      }
      if (e->HasParent() && e->block->parent != counted) StampAncestorsLocked(*e, stamp);
      counted = e;
      ++out.count;
      if (bitmap != nullptr) bitmap[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
      if (pin) {
        if (lease.keys.empty()) lease.keys.reserve(bitmap != nullptr ? n - i : 16);
        PinEntryLocked(*e);
        lease.keys.emplace_back(e, e->born);
      }
    }
  }
  if (pin && !lease.keys.empty()) {
    out.lease = leases_.Add(std::move(lease), now + pin_ms, user);
  }
  return out;
}

Store::BlockMatchResult Store::BlockMatchSimple(std::span<const std::string_view> keys,
                                                uint8_t* bitmap, int64_t pin_ms,
                                                std::string_view user) {
  BlockMatchResult out;
  const int64_t now = UnixMillis();
  const uint64_t stamp = ks_.NextStamp();  // one stamp for every key counted
  if (pin_ms <= 0) {
    // The read path: one shard lock at a time. An expired key, or a counted
    // block with a parent (ancestors to stamp), sends the call to the path
    // under ks_.mu below, which starts over.
    bool slow = false;
    for (size_t i = 0; i < keys.size() && !slow; ++i) {
      Shard& sh = ks_.ShardFor(keys[i]);
      base::MutexLock sl(&sh.mu);
      auto it = sh.strings.find(keys[i]);
      if (it == sh.strings.end()) {
        if (bitmap == nullptr) break;
        continue;
      }
      StrEntry& e = it->second;
      if ((e.expire_at_ms != 0 && Expired(e, now)) || e.HasParent()) {
        slow = true;
        break;
      }
      e.stamp = stamp;
      sh.MoveToTail(e);
      ++out.count;
      if (bitmap != nullptr) bitmap[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
    }
    if (!slow) return out;
    out.count = 0;
    if (bitmap != nullptr) std::memset(bitmap, 0, (keys.size() + 7) / 8);
  }
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  ReleaseDueLeasesLocked(now, &unused);
  bool pin = pin_ms > 0;
  if (pin && leases_.full()) {
    out.too_many_leases = true;
    pin = false;
  }
  PinLease lease;
  for (size_t i = 0; i < keys.size(); ++i) {
    StrEntry* e = StrFindLocked(keys[i], now, &unused);
    if (e == nullptr) {
      if (bitmap == nullptr) break;
      continue;
    }
    {
      Shard& sh = ks_.ShardFor(keys[i]);
      base::MutexLock sl(&sh.mu);
      e->stamp = stamp;
      sh.MoveToTail(*e);
    }
    if (e->HasParent()) StampAncestorsLocked(*e, stamp);
    ++out.count;
    if (bitmap != nullptr) bitmap[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
    if (pin) {
      if (lease.keys.empty()) lease.keys.reserve(bitmap != nullptr ? keys.size() - i : 16);
      PinEntryLocked(*e);
      lease.keys.emplace_back(e, e->born);
    }
  }
  if (pin && !lease.keys.empty()) {
    out.lease = leases_.Add(std::move(lease), now + pin_ms, user);
  }
  return out;
}

uint64_t Store::BlockUnpin(std::span<const uint64_t> ids, std::string_view user) {
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  ReleaseDueLeasesLocked(UnixMillis(), &unused);
  uint64_t n = 0;
  for (uint64_t id : ids) {
    if (!leases_.OwnedBy(id, user)) continue;
    EndLeaseLocked(id, &unused);
    ++n;
  }
  return n;
}

Store::PinStats Store::PinStatsNow() const {
  base::MutexLock l(&ks_.mu);
  return leases_.Stats();
}

void Store::SetMaxBlockLeases(uint64_t n) {
  base::MutexLock l(&ks_.mu);
  leases_.set_max_leases(n);
}

}  // namespace pion::store
