// KV.BLOCK.MATCH and UNPIN (store/block_ops.h): the probe of a run of block
// keys, with its one-key-at-a-time reference, and the end of a lease. The
// pins themselves are the keyspace's (store/pins.cc: an entry's pin count,
// the lease table, a lease's end).
//
// MATCH without PIN takes only shard locks: the keys are hashed a chunk at a
// time, the chunk's shards are locked together in shard order, and the
// lookups run in passes so that their cache misses overlap. An expired key, or
// a counted block with a parent (ancestors to stamp), sends the call to the
// path under ks.mu, which starts over; so does PIN.
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
#include "store/block_ops.h"
#include "store/expiry.h"
#include "store/lease_table.h"

namespace pion::store {

namespace {

// MATCH looks its keys up this many at a time.
constexpr size_t kMatchChunk = 128;

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

// A key counted on a read path (its shard's lock held): the call's one
// stamp, the tail of the shard's LRU list, its bit.
inline void CountLocked(Shard& sh, StrEntry& e, uint64_t stamp, size_t i, uint8_t* bitmap,
                        BlockMatchResult* out) REQUIRES(sh.mu) {
  e.stamp = stamp;
  sh.MoveToTail(e);
  ++out->count;
  if (bitmap != nullptr) bitmap[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
}

// A read path that met a key it cannot count under shard locks alone: what it
// counted is undone, and the call starts over under ks.mu.
void Restart(BlockMatchResult* out, uint8_t* bitmap, size_t n) {
  out->count = 0;
  if (bitmap != nullptr) std::memset(bitmap, 0, (n + 7) / 8);
}

// Under ks.mu, before the keys are counted: the due leases end; whether the
// keys counted are pinned (not without pin_ms, nor while max-block-leases are
// live: too_many_leases).
bool StartPins(const Slice& s, int64_t now, int64_t pin_ms, BlockMatchResult* out)
    REQUIRES(s.ks.mu) {
  s.ReleaseDueLeasesLocked(now);
  if (pin_ms <= 0) return false;
  if (!s.LeasesLocked().full()) return true;
  out->too_many_leases = true;
  return false;
}

// A counted key pinned into `lease`; `left` keys may still follow.
void PinInto(const Slice& s, StrEntry& e, size_t left, PinLease* lease) REQUIRES(s.ks.mu) {
  if (lease->keys.empty()) lease->keys.reserve(left);
  s.PinLocked(e);
  lease->keys.emplace_back(&e, e.born);
}

// The lease of the keys pinned, if any (else lease 0).
void EndPins(const Slice& s, PinLease lease, int64_t deadline, std::string_view user,
             BlockMatchResult* out) REQUIRES(s.ks.mu) {
  if (!lease.keys.empty()) out->lease = s.LeasesLocked().Add(std::move(lease), deadline, user);
}

}  // namespace

BlockMatchResult OpBlockMatch(const OpArgs& op, std::span<const std::string_view> keys,
                              uint8_t* bitmap, int64_t pin_ms, std::string_view user) {
  const Slice& s = op.slice;
  // OpBlockMatchSimple's rules, made cheap per key: each key is hashed once, a
  // chunk at a time, and that hash gives both its shard (ShardOfHash; a key
  // with a hash tag hashes the tag for its shard) and its bucket; the string
  // map compares cached hashes before keys (StrHash), and under s.ks.mu a block
  // whose parent is the key counted just before it skips the ancestor walk
  // (that key's walk stamped them already).
  BlockMatchResult out;
  const size_t n = keys.size();
  const int64_t now = UnixMillis();
  const uint64_t stamp = s.ks.NextStamp();  // one stamp for every key counted
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
  auto shard_of = [&](size_t j) -> Shard& { return s.ks.shard(shard_ix[j]); };
  if (pin_ms <= 0) {
    // The read path: one shard lock at a time. An expired key, or a counted
    // block with a parent (ancestors to stamp), sends the call to the path
    // under s.ks.mu below, which starts over.
    bool slow = false, stop = false;
    static_assert(kShards <= 32, "a chunk's shards fit a 32-bit mask");
    for (size_t base = 0; base < n && !slow && !stop; base += kMatchChunk) {
      const size_t m = std::min(kMatchChunk, n - base);
      hash_chunk(base, m);
      // The chunk's shards are locked together, in shard order: one lock per
      // shard per chunk instead of one per key. Every other path holds at most
      // one shard lock at a time (and takes none of s.ks.mu under it), so this
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
      } locks(s.ks.shards().data(), mask);
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
        if ((f->expire_at_ms != 0 && Expired(*f, now)) || f->HasParent()) {
          slow = true;
          break;
        }
        CountLocked(sh, *f, stamp, i, bitmap, &out);
      }
    }
    if (!slow) return out;
    Restart(&out, bitmap, n);
  }
  base::ReaderLock gate(&s.gate());
  base::MutexLock l(&s.ks.mu);
  uint64_t unused = 0;
  const bool pin = StartPins(s, now, pin_ms, &out);
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
      StrEntry* e = s.ks.IndexOf(sh).Find(
          hash[j], [&](const StrEntry* x) { return SameKey(*x->key, keys[i]); });
      if (e != nullptr && Expired(*e, now)) {
        (void)s.RemoveLocked(*e, 2, &unused);  // a failed log write keeps it (still expired)
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
        CountLocked(sh, *e, stamp, i, bitmap, &out);
      }
      if (e->HasParent() && e->block->parent != counted) s.StampAncestorsLocked(*e, stamp);
      counted = e;
      if (pin) PinInto(s, *e, bitmap != nullptr ? n - i : 16, &lease);
    }
  }
  EndPins(s, std::move(lease), now + pin_ms, user, &out);
  return out;
}

BlockMatchResult OpBlockMatchSimple(const OpArgs& op, std::span<const std::string_view> keys,
                                    uint8_t* bitmap, int64_t pin_ms, std::string_view user) {
  const Slice& s = op.slice;
  BlockMatchResult out;
  const int64_t now = UnixMillis();
  const uint64_t stamp = s.ks.NextStamp();  // one stamp for every key counted
  if (pin_ms <= 0) {
    // The read path: one shard lock at a time. An expired key, or a counted
    // block with a parent (ancestors to stamp), sends the call to the path
    // under s.ks.mu below, which starts over.
    bool slow = false;
    for (size_t i = 0; i < keys.size() && !slow; ++i) {
      Shard& sh = s.ks.ShardFor(keys[i]);
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
      CountLocked(sh, e, stamp, i, bitmap, &out);
    }
    if (!slow) return out;
    Restart(&out, bitmap, keys.size());
  }
  base::ReaderLock gate(&s.gate());
  base::MutexLock l(&s.ks.mu);
  uint64_t unused = 0;
  const bool pin = StartPins(s, now, pin_ms, &out);
  PinLease lease;
  for (size_t i = 0; i < keys.size(); ++i) {
    StrEntry* e = s.FindLocked(keys[i], now, &unused);
    if (e == nullptr) {
      if (bitmap == nullptr) break;
      continue;
    }
    {
      Shard& sh = s.ks.ShardFor(keys[i]);
      base::MutexLock sl(&sh.mu);
      CountLocked(sh, *e, stamp, i, bitmap, &out);
    }
    if (e->HasParent()) s.StampAncestorsLocked(*e, stamp);
    if (pin) PinInto(s, *e, bitmap != nullptr ? keys.size() - i : 16, &lease);
  }
  EndPins(s, std::move(lease), now + pin_ms, user, &out);
  return out;
}

uint64_t OpBlockUnpin(const OpArgs& op, std::span<const uint64_t> ids, std::string_view user) {
  const Slice& s = op.slice;
  base::ReaderLock gate(&s.gate());
  base::MutexLock l(&s.ks.mu);
  s.ReleaseDueLeasesLocked(UnixMillis());
  uint64_t n = 0;
  for (uint64_t id : ids) {
    if (!s.LeasesLocked().OwnedBy(id, user)) continue;
    s.EndLeaseLocked(id);
    ++n;
  }
  return n;
}

}  // namespace pion::store
