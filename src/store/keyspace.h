// The keyspace: where every key lives and the orders the store keeps over
// them, apart from what the values are. It holds
//  * kShards shards (store/shard.h) of key -> value: namespaces and string
//    keys, with each shard's lock, flat hash index and LRU lists;
//  * the writers' lock `mu`: a change to a shard's maps, or to the orders
//    below, holds it and the shard's lock (a reader holds only the shard's);
//  * the LRU clock (one stamp per touch, shared by both kinds of key) and the
//    LFU counter's parameters;
//  * the string keys' scan order (SCAN's cursor is the next hash to visit)
//    and expiry order (active expiry, volatile-ttl, INFO's avg_ttl);
//  * WATCH's versions: a version per write and a count of removals.
// A string key enters and leaves through InsertStringLocked and
// EraseStringLocked, which keep the map, the index, the LRU list and both
// orders in step. What a key costs, how it is logged, evicted or moved to the
// disk tier is the Store's (store.h), which owns one Keyspace.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string_view>
#include <utility>

#include "base/mutex.h"
#include "store/shard.h"
#include "store/store_types.h"
#include "store/strings.h"

namespace pion::store {

class Keyspace {
 public:
  using ScanOrder = std::set<std::pair<uint64_t, StrEntry*>>;   // (hash, entry)
  using ExpiryOrder = std::set<std::pair<int64_t, StrEntry*>>;  // (expire_at_ms, entry)

  Keyspace() = default;
  Keyspace(const Keyspace&) = delete;
  Keyspace& operator=(const Keyspace&) = delete;

  // The writers' lock (see the header comment and store.h's lock order:
  // side -> mu -> shard).
  mutable base::Mutex mu;

  // ---- Where a key lives ----
  // The hash the string map places a key by (XXH3; StrEntry::hash).
  static uint64_t LookupHash(std::string_view key);
  // The top kShardBits bits of a hash: the shard of a key without a hash tag
  // whose LookupHash is `h` (KV.BLOCK.MATCH hashes each key once for both).
  static size_t ShardOfHash(uint64_t h) { return static_cast<size_t>(h >> (64 - kShardBits)); }
  // ShardOfHash of the LookupHash of the key's hash tag (the key itself where
  // it has none): a hash tag keeps keys together.
  static size_t ShardIndex(std::string_view key);
  // The same for a key whose LookupHash is known (no second hash unless it has a '{').
  static size_t ShardIndex(std::string_view key, uint64_t lookup_hash);
  Shard& ShardFor(std::string_view key) { return shards_[ShardIndex(key)]; }
  const Shard& ShardFor(std::string_view key) const { return shards_[ShardIndex(key)]; }
  Shard& shard(size_t i) { return shards_[i]; }
  const Shard& shard(size_t i) const { return shards_[i]; }
  std::span<Shard, kShards> shards() { return shards_; }
  std::span<const Shard, kShards> shards() const { return shards_; }

  // A shard's maps as a holder of `mu` reads them without the shard's lock:
  // they change only with both held, so under `mu` they stand still. "Either
  // lock" is beyond the analysis, hence these.
  NsMap& MapOf(Shard& sh) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS { return sh.map; }
  const NsMap& MapOf(const Shard& sh) const REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    return sh.map;
  }
  StrMap& StringsOf(Shard& sh) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS { return sh.strings; }
  const StrMap& StringsOf(const Shard& sh) const REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    return sh.strings;
  }
  const StrIndex& IndexOf(const Shard& sh) const REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    return sh.index;
  }

  // Sampling (eviction, RANDOMKEY) takes every shard's string map, or every
  // shard's namespace map, as one table of buckets, one shard after the
  // other: a bucket's place in it, the table's size, the place of bucket `g`
  // (< the size), and the next place (wrapping from the last to the first).
  struct BucketPos {
    size_t shard = 0;
    size_t bucket = 0;
  };
  size_t StringBucketsLocked() const REQUIRES(mu) { return Buckets(&Shard::strings); }
  size_t NamespaceBucketsLocked() const REQUIRES(mu) { return Buckets(&Shard::map); }
  BucketPos StringBucketLocked(size_t g) const REQUIRES(mu) { return At(&Shard::strings, g); }
  BucketPos NamespaceBucketLocked(size_t g) const REQUIRES(mu) { return At(&Shard::map, g); }
  void NextStringBucketLocked(BucketPos* p) const REQUIRES(mu) { Next(&Shard::strings, p); }
  void NextNamespaceBucketLocked(BucketPos* p) const REQUIRES(mu) { Next(&Shard::map, p); }

  // A string key's entry, expired or not; nullptr when there is none.
  StrEntry* FindStringLocked(std::string_view key) const REQUIRES(mu);
  // A new entry for `key` (which has none) in its shard `sh` (whose lock the
  // caller holds): in the map, the index, the scan order and, as the most
  // recent, the RAM LRU list; no value, no expiry.
  StrEntry& InsertStringLocked(Shard& sh, std::string_view key) REQUIRES(mu) REQUIRES(sh.mu);
  // Takes `e` out of its shard `sh` (lock held) and every order, counting a
  // removal (WATCH). `e` is gone afterwards.
  void EraseStringLocked(Shard& sh, StrEntry& e) REQUIRES(mu) REQUIRES(sh.mu);
  // Empties every shard's string map, index and lists and both orders (FLUSHALL).
  void ClearStringsLocked() REQUIRES(mu);

  // ---- LRU and LFU ----
  // The LRU stamp of a touch. A relaxed load and store, no read-modify-write:
  // touches in sequence (on any threads) get increasing stamps; concurrent
  // ones may tie or lose an increment (as good as either order for an LRU).
  uint64_t NextStamp() {
    const uint64_t s = lru_clock_.load(std::memory_order_relaxed) + 1;
    lru_clock_.store(s, std::memory_order_relaxed);
    return s;
  }
  // Keeps NextStamp above a restored stamp (recovery).
  void RaiseClockAbove(uint64_t stamp);
  // A touch of a string key (its shard's lock held): a new stamp and access
  // time, the LFU counter's access, the most recent of its list.
  void TouchLocked(Shard& sh, StrEntry& e) REQUIRES(sh.mu);
  // The entry's LFU counter decayed to now (Redis's: one per lfu-decay-time
  // minutes), and the access that may bump it (probability 1 / ((counter -
  // 5) * lfu-log-factor + 1)); the entry's shard lock held.
  uint8_t LfuDecayed(const StrEntry& e) const;
  void LfuTouch(StrEntry& e);
  // A new key's counter (Redis's initial 5, decayed from now).
  static void LfuInit(StrEntry& e);
  // lfu-log-factor and lfu-decay-time (minutes; 0: never decays).
  void SetLfuParams(uint32_t log_factor, uint32_t decay_time);

  // ---- Expiry ----
  // Sets e's expiry (0: none), keeping the expiry order. The entry's shard
  // lock is the caller's to take when readers may look (SetExpireShardLocked).
  void SetExpireLocked(StrEntry& e, int64_t at_ms) REQUIRES(mu);
  void SetExpireShardLocked(StrEntry& e, int64_t at_ms) REQUIRES(mu);
  const ExpiryOrder& expiry_order() const REQUIRES(mu) { return expiry_order_; }
  // The mean of the expiry times (unix ms), 0 when none is set.
  int64_t MeanExpireMsLocked() const REQUIRES(mu);

  // ---- SCAN ----
  const ScanOrder& scan_order() const REQUIRES(mu) { return scan_order_; }

  // ---- WATCH ----
  // The version a write gives its key.
  uint64_t NextVersionLocked() REQUIRES(mu) { return ++version_; }
  // A missing key's WATCH version: the removals so far, with bit 62 set (so
  // no write's version equals it).
  uint64_t MissingVersionLocked() const REQUIRES(mu) { return removals_ | (uint64_t{1} << 62); }
  // Writes and removals so far (INFO's changes since the last save).
  uint64_t ChangesLocked() const REQUIRES(mu) { return version_ + removals_; }

 private:
  template <typename Map>
  size_t Buckets(Map Shard::*m) const NO_THREAD_SAFETY_ANALYSIS {
    size_t n = 0;
    for (const Shard& sh : shards_) n += (sh.*m).bucket_count();
    return n;
  }
  template <typename Map>
  BucketPos At(Map Shard::*m, size_t g) const NO_THREAD_SAFETY_ANALYSIS {
    BucketPos p;
    while (g >= (shards_[p.shard].*m).bucket_count()) g -= (shards_[p.shard++].*m).bucket_count();
    p.bucket = g;
    return p;
  }
  template <typename Map>
  void Next(Map Shard::*m, BucketPos* p) const NO_THREAD_SAFETY_ANALYSIS {
    if (++p->bucket == (shards_[p->shard].*m).bucket_count()) {
      p->bucket = 0;
      p->shard = (p->shard + 1) % kShards;
    }
  }

  Shard shards_[kShards];
  std::atomic<uint64_t> lru_clock_{0};
  // Read by readers under a shard lock only.
  std::atomic<uint32_t> lfu_log_factor_{10};
  std::atomic<uint32_t> lfu_decay_time_{1};
  ScanOrder scan_order_ GUARDED_BY(mu);
  ExpiryOrder expiry_order_ GUARDED_BY(mu);
  int64_t expire_sum_ms_ GUARDED_BY(mu) = 0;  // sum over expiry_order_
  uint64_t version_ GUARDED_BY(mu) = 0;
  uint64_t removals_ GUARDED_BY(mu) = 0;
};

}  // namespace pion::store
