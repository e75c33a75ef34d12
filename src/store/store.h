// The V-store and prefix registry: namespaces, each holding a K side
// ("<ns>_pk") and a V side ("<ns>_pv") of up to kMaxLayers layers of rows in
// stored (quantized) form, an optional block-hash table and a reported prefill
// time, and the string keys. It is shared by every worker thread. The
// commands' operations on it are free functions over a Slice of it
// (store/slice.h: store/string_ops.h, key_ops.h, prefix_ops.h, block_ops.h);
// the class keeps the keyspace's state and upkeep: budget and eviction,
// expiry, pins and links, the disk tier, snapshots and recovery. See
// docs/ARCHITECTURE.md "Store" for the locking design, summarised here:
//
//  * The keys live in a Keyspace (store/keyspace.h, ks_): kShards shards by
//    key hash (a hash tag keeps keys together), the LRU clock, the string
//    keys' scan and expiry orders and WATCH versions. A shard's mutex guards
//    its namespace map, string map and LRU lists. The read paths (OpLookup,
//    OpBlocks, the namespace's Find for fetches and stores, and the string
//    reads OpGet, OpMGet, OpExists) take only their key's shard lock.
//  * ks_.mu (one mutex) serialises every change to the key space, the byte and
//    session accounting (rows and block tables) and eviction. A writer changes
//    a shard's maps, LRU list or the fields readers read (prefill_us, blocks,
//    a string's value and expiry) only while also holding that shard's lock,
//    one shard at a time (shard-index order when it walks them all), never
//    two at once. It is held only for map/accounting updates, reservations
//    and logging small records (drop, flushall).
//  * Each side of a namespace has its own mutex guarding its layer tables. A
//    store encodes rows with *no* lock held, then takes the side lock, reserves
//    bytes under ks_.mu (lock order: side -> ks_.mu -> shard, never the reverse; a
//    reader never takes a side lock while holding a shard lock) and its log
//    record, releases the locks, writes the record, and applies the rows under
//    the side lock in reservation order (tickets). A register reserves under
//    ks_.mu, writes holding only reg_mu_ (registrations are serialised), applies
//    under ks_.mu. No store lock is held while a payload is written to the log.
//  * Rows live in fixed-capacity chunks held by shared_ptr. A fetch takes
//    references to the chunks it needs under the side lock and releases the
//    lock before decoding or sending, so eviction, DROP or an overwrite never
//    frees or changes bytes still in flight: a writer modifies a chunk in place
//    only when it holds the only reference, else it copies it first (COW).
//  * gate_ (shared_mutex) is held shared by every mutation while it reserves and
//    exclusively by CaptureSnapshot, which also waits until no reserved change
//    is still to be applied, so a snapshot sees a state that matches one log
//    position.
//
// LRU and lineage: every namespace carries a stamp from the store's clock
// (NextStamp: relaxed load and store; concurrent touches may tie), and a touch
// also stamps every ancestor (REGISTER ... PARENT links form a forest), so a chain
// ages as one unit. Eviction (eviction.cc, Redis's sampled pool) takes whole
// namespaces, leaves only, oldest first, never the one being written; DROP removes
// a subtree leaves first. docs/ARCHITECTURE.md "Store" has the details and the
// list of files.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/sharded_counter.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "quant/format.h"
#include "store/block_index.h"
#include "store/chunk.h"
#include "store/eviction_pool.h"
#include "store/keyspace.h"
#include "store/lease_table.h"
#include "store/mutation.h"
#include "store/observers.h"
#include "store/reason.h"
#include "store/session_id.h"
#include "store/shard.h"
#include "store/store_types.h"
#include "store/strings.h"
#include "store/tier_counters.h"
#include "store/tier_jobs.h"

namespace pion::store {

class Namespace;

class Store {
 public:
  using TierStats = store::TierStats;
  using BlockMatchResult = store::BlockMatchResult;
  using PinStats = store::PinStats;
  using ChainArgs = store::ChainArgs;
  using BlockInfo = store::BlockInfo;
  explicit Store(StoreConfig cfg);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Persistence hook; nullptr (the default) logs nothing. Set before serving.
  void SetSink(MutationSink* sink) { sink_ = sink; }
  // Removal hook; nullptr (the default) tells nobody. Set before serving.
  void SetRemovalObserver(RemovalObserver* o) { observer_ = o; }
  // Block-table hook; nullptr (the default) tells nobody. Set while no command
  // runs (before serving, or while loading).
  void SetBlockTableObserver(BlockTableObserver* o) { block_observer_ = o; }
  // Every namespace's non-empty block table, parents before their children.
  std::vector<ResidentTable> ResidentBlockTables() const;
  // Every hashed block key (KV.BLOCK.CHAIN ... HASHES) as runs, parents before
  // their children (block_links.cc).
  std::vector<ResidentBlockRun> ResidentBlockKeys() const;

  // Each mutating call sets *lsn to the largest log sequence number it appended
  // (0 if nothing was logged); the caller waits for it before acknowledging.
  // The prefix operations (register, lookups, rows, drop) are free functions
  // over the keyspace: store/prefix_ops.h.
  Status FlushAll(uint64_t* lsn);
  uint64_t NamespaceCount() const;
  // The registered namespaces' names (ACL-filtered FLUSHALL, DBSIZE, INFO keyspace).
  std::vector<std::string> NamespaceNames() const;
  StoreStats Stats() const;

  // Run-time configuration (CONFIG SET maxmemory): evicts down to the new budget
  // as far as the policy allows (under noeviction the budget may stay exceeded:
  // OK, as Redis; only a failure to log an eviction is an error).
  Status SetMaxBytes(uint64_t max_bytes, uint64_t* lsn);
  uint64_t max_bytes() const;
  // The bytes charged against max_bytes now (string keys and namespaces; INFO used_memory).
  uint64_t used_bytes() const;
  // Redis's check before a command that may use memory (a write queued in
  // MULTI, EXEC of such writes): with a byte budget, evicts by the policy
  // until one more smallest entry (kStrEntryOverhead bytes) fits below it;
  // true when it cannot (noeviction, or nothing left to evict). *lsn: what
  // the evictions logged (0 when none).
  bool OutOfMemory(uint64_t* lsn);

  // Snapshots: blocks every mutation, calls `at_barrier` (e.g. to start a new
  // WAL generation: nothing logged after this point belongs in the snapshot),
  // pins every namespace, lets mutations go on, then returns the views in
  // persistence's own form (parents before children, oldest first at each
  // depth). A view's `blocks` is the namespace's BlockTable itself.
  std::vector<persist::SnapshotNamespace> CaptureSnapshot(const std::function<Status()>& at_barrier,
                                                          Status* barrier_status);

  // Recovery (used before serving; nothing is logged): apply one logged change.
  // Records of another incarnation than the namespace's current one are skipped
  // (ApplyStored returns NotFound, ApplyDrop does nothing).
  // `parent` (with its incarnation) links the namespace to a present parent;
  // one that is not present (evicted while loading) skips the registration.
  Status ApplyRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                       quant::Format fmt, const persist::BlockRecord* blocks,
                       std::string_view parent = {}, uint64_t parent_incarnation = 0);
  // `backing` (may be null): `stored` lies in memory it keeps alive and unchanged
  // (a mapped snapshot); whole, 64-byte-aligned chunks of it are then kept by
  // reference (Chunk::Borrow, frozen: a write copies them) instead of copied.
  Status ApplyStored(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                     uint64_t start, uint64_t count, std::span<const uint8_t> stored,
                     const std::shared_ptr<const void>* backing = nullptr);
  void ApplyDrop(std::string_view ns, uint64_t incarnation);  // with its subtree
  void ApplyFlushAll();
  // Restores a namespace's LRU stamp (snapshot load); keeps the counter above it.
  void SetLruStamp(std::string_view ns, uint64_t stamp);

  // ---- String keys (docs/protocol.md "Keys") ----
  // Their operations are free functions over a Slice of this store
  // (store/slice.h): store/string_ops.h (SET, GET, MSET, APPEND...) and
  // store/key_ops.h (DEL, EXISTS, RENAME, EXPIRE, SCAN...). What stays here is
  // the keyspace's upkeep.
  uint64_t DbSize() const;
  // Removes up to `max_keys` keys whose TTL has passed (logged); how many.
  uint64_t ExpireActive(uint64_t max_keys);
  KeyspaceStats KeyStats() const;

  // ---- Disk tier (store/tiering.cc, docs/operations.md "Disk tier") ----
  // String values of at least min_value bytes that the budget pushes out of
  // RAM move to the tier's file instead of being evicted; reads serve them
  // from there. Attach before serving; DetachTier before the store goes.
  // `adopt`: the file is kept, and a snapshot load adopts the extents it
  // references (ApplyStrTier) until FinishTierAdoption; otherwise it is emptied.
  Status AttachTier(const std::string& dir, uint64_t max_bytes, uint64_t min_value,
                    uint64_t queue_bytes, uint32_t io_threads, bool adopt = false);
  // Stops the tier's I/O; from then on freed extents are not punched out (the
  // last snapshot may reference them for the next start).
  void DetachTier();
  // After recovery (snapshot and WAL): the file's space no adopted extent
  // holds becomes free. Before MoveOverBudgetToTier.
  void FinishTierAdoption();
  // A snapshot's STRING_TIER section (docs/snapshot_format.md §6): the key
  // becomes a tiered entry on the referenced extent when its header matches;
  // otherwise (or without a tier) it is dropped as the tier drops entries.
  void ApplyStrTier(const persist::StrTierRecord& r);
  // A snapshot's NAMESPACE_TIER section (docs/snapshot_format.md §7): the
  // namespace's referenced chunks borrow the tier's mapping when the extent's
  // header matches (the namespace is tiered again when every chunk is there);
  // otherwise (or without a tier) the namespace is dropped with its children.
  void ApplyNamespaceTier(const persist::NsTierRecord& r);
  // The tier file's fdatasync (before a snapshot that references it is renamed).
  Status SyncTierForSnapshot();
  // The extents the snapshot now in place references (adopted at start, or
  // pinned by the last default-path save): held, so never reused, until the next.
  void SetSnapshotTierPins(std::vector<std::shared_ptr<const void>> pins);
  // Tests: string keys and namespaces adopted from the tier at the last load, and
  // the references of either kind dropped there.
  uint64_t tier_adopted() const { return tier_counters_.adopted(); }
  uint64_t tier_ns_adopted() const { return tier_counters_.ns_adopted(); }
  uint64_t tier_adopt_drops() const { return tier_counters_.adopt_drops(); }
  // CONFIG SET: a smaller tier drops its least recently used values now.
  void SetTierMaxBytes(uint64_t n);
  void SetTierMinValue(uint64_t n);
  // After recovery: what the log and snapshot brought back beyond the budget
  // moves to the tier, oldest first (nothing is dropped). Returns the entries moved.
  uint64_t MoveOverBudgetToTier();
  TierStats tier_stats() const;
  // Tests: the tier's file (fault injection), or null without a tier.
  tier::TierFile* tier_file_for_test() { return tier_.get(); }
  // Reading a namespace whose chunks borrow the tier's mapping without blocking:
  // TierCheckFor(sid) says whether a read of `sid` needs the check (and of
  // which extent), ReadTierCheck reads the extent (as ReadTiered reads), and
  // ApplyTierCheck, on the worker, does what CheckTieredNamespace does with it.
  // A fetch run under a TierCheckedScope of the namespace then reads it as it is.
  struct TierCheck {
    std::shared_ptr<Namespace> ns;
    tier::ExtentRef extent;
  };
  std::optional<TierCheck> TierCheckFor(std::string_view sid);
  void ReadTierCheck(const TierCheck& c,
                     std::function<void(Result<OwnedBuffer> buf, size_t at)> done);
  Status ApplyTierCheck(const TierCheck& c, Result<OwnedBuffer> buf, size_t at);
  class TierCheckedScope {
   public:
    explicit TierCheckedScope(const Namespace* n);
    ~TierCheckedScope();
    TierCheckedScope(const TierCheckedScope&) = delete;
    TierCheckedScope& operator=(const TierCheckedScope&) = delete;

   private:
    const Namespace* prev_;
  };
  // Tests: the extent a namespace's chunks borrow, or null.
  tier::ExtentRef namespace_extent_for_test(std::string_view ns);
  // A read of a value on disk (v->on_disk()) with one checked direct read; `done`
  // runs with the value in a RAM buffer, or the error (a damaged extent:
  // Corruption). On a thread with a tier::ReadRing (a worker) an extent below
  // kTierRingReadMax is read through that ring and `done` runs on this thread
  // from its Reap(), never inside this call; else the read runs on a tier I/O
  // thread and `done` runs there. ReadTierCheck reads the same ways.
  static constexpr uint64_t kTierRingReadMax = 4ull << 20;
  void ReadTiered(std::string key, StrRef v, std::function<void(Result<StrRef>)> done);
  // After ReadTiered, on a worker: `fresh` replaces `v` when the key still
  // holds it and it fits the budget once colder RAM values moved to the tier.
  // Never from inside `done` on a tier I/O thread: a move waits for the tier's
  // write back-pressure, which only those threads relieve (the server runs it
  // where the deferred reply completes, on the worker).
  void PromoteTiered(std::string_view key, const StrRef& v, const StrRef& fresh);
  // After ReadTiered failed on damage: the key, if it still holds `v`, is
  // dropped as the tier drops entries (logged, counted, announced).
  void DropDamagedTiered(std::string_view key, const StrRef& v);
  void SetEvictPolicy(EvictPolicy p);
  EvictPolicy evict_policy() const;
  // maxmemory-samples (>= 1): namespaces sampled per eviction (and string keys
  // per eviction under the LFU, TTL and volatile-random policies).
  void SetEvictionSamples(uint32_t n);
  // lfu-log-factor and lfu-decay-time (minutes; 0: never decays), as Redis's.
  void SetLfuParams(uint32_t log_factor, uint32_t decay_time) {
    ks_.SetLfuParams(log_factor, decay_time);
  }
  void ResetKeyStats();
  // Recovery (nothing logged; expired values are skipped).
  void ApplyStrSet(std::string_view key, int64_t expire_at_ms, uint64_t lru_stamp,
                   std::span<const uint8_t> value);
  void ApplyStrDel(std::string_view key);
  void ApplyStrExpire(std::string_view key, int64_t expire_at_ms);
  void ApplyStrRename(std::string_view src, std::string_view dst);
  void ApplyStrPatch(std::string_view key, int64_t expire_at_ms, uint64_t offset,
                     std::span<const uint8_t> bytes, bool truncate);
  // The string keys the last CaptureSnapshot pinned (at the same barrier),
  // oldest LRU first; empties the list.
  std::vector<persist::SnapshotString> TakeCapturedStrings();

  // ---- Blocks (store/pins.cc, store/block_links.cc; docs/protocol.md "Blocks") ----
  // KV.BLOCK.MATCH, UNPIN and CHAIN are free functions over the keyspace
  // (store/block_ops.h); the pins, leases and links they use are kept here.
  PinStats PinStatsNow() const;
  void SetMaxBlockLeases(uint64_t n);
  // Recovery: a STRCHAIN record, and a snapshot's BLOCK section.
  void ApplyStrChain(const persist::StrChainRecord& r);
  void ApplyStrBlock(const persist::StrBlockRecord& r);
  void ApplyStrQuant(const persist::StrQuantRecord& r);

  // Splits "<ns>_pk"/"<ns>_pv"; false for any other id (store/session_id.h).
  static bool ParseSessionId(std::string_view sid, std::string_view* ns, Side* side) {
    return store::ParseSessionId(sid, ns, side);
  }

 private:
  // The operations' view of the store's internals (store/slice.h).
  friend class Slice;
  // The namespace, or nullptr.
  Namespace* NsFindLocked(std::string_view ns) const REQUIRES(ks_.mu);
  // Asks `may_drop` for every namespace of the subtrees under `todo` (under
  // ks_.mu); kDropRefused at the first refusal.
  static Status AskSubtrees(std::vector<const Namespace*> todo,
                            const std::function<bool(std::string_view ns)>& may_drop);
  const NsPtr* NsRefLocked(std::string_view ns) const REQUIRES(ks_.mu);
  uint64_t NsCountLocked() const REQUIRES(ks_.mu);
  uint64_t StrCountLocked() const REQUIRES(ks_.mu);
  // Whether `key` names a namespace or one of its session ids, taking the shard
  // locks one at a time (a reader's check; no ks_.mu).
  bool IsNamespaceKeyShared(std::string_view key) const;

  NsPtr Find(std::string_view ns) const;  // takes only the shard lock
  NsPtr FindAndTouch(std::string_view ns);
  void Touch(Namespace& n);
  // REQUIRES ks_.mu. Removes `n` (which has no live child) from the map, its
  // parent's children and the accounting; logs the drop.
  Status RemoveLocked(const NsPtr& n, DropReason reason, uint64_t* lsn) REQUIRES(ks_.mu);
  // REQUIRES ks_.mu. `n` and its descendants, leaves first; counts them in *removed.
  Status RemoveSubtreeLocked(const NsPtr& n, DropReason reason, uint64_t* lsn, uint64_t* removed)
      REQUIRES(ks_.mu);
  // REQUIRES ks_.mu. Evicts by the maxmemory policy (string keys and namespaces
  // in one LRU; never `keep` or the string `keep_key`) until `fits` holds.
  // Namespaces go leaves first (store.h "Lineage"): `keep`'s ancestors never.
  Status EvictLocked(const Namespace* keep, const std::function<bool()>& fits, uint64_t* lsn,
                     std::string_view keep_key = {}, bool keep_key_set = false) REQUIRES(ks_.mu);
  // REQUIRES ks_.mu. Evicts LRU namespaces other than `keep` (and its ancestors),
  // leaves first, until `fits` holds (the session cap).
  Status EvictNamespacesLocked(const Namespace* keep, const std::function<bool()>& fits,
                               uint64_t* lsn) REQUIRES(ks_.mu);
  // REQUIRES ks_.mu. Sampled LRU (eviction.cc): offers `n` to the pool if it is an
  // evictable leaf; samples maxmemory-samples namespaces into the pool; the
  // pool's oldest leaf after re-reading its entries (null if there is no leaf
  // but keep); drops an evicted namespace from the pool and offers its parent.
  bool OfferToPoolLocked(const NsPtr& n, const Namespace* keep)
      REQUIRES(ks_.mu);  // true if a candidate
  void SampleLeavesLocked(const Namespace* keep) REQUIRES(ks_.mu);
  NsPtr OldestPooledLeafLocked(const Namespace* keep) REQUIRES(ks_.mu);
  void EvictedFromPoolLocked(const NsPtr& victim, const Namespace* keep) REQUIRES(ks_.mu);
  // REQUIRES ks_.mu (eviction.cc). Up to maxmemory-samples string keys from a
  // random place of the shards' tables, none `is_kept` and, when
  // `volatile_only`, each with a TTL: the one the policy evicts first (the
  // lowest LFU counter, the nearest expiry, or the first found); null if none.
  StrEntry* SampleStringVictimLocked(bool volatile_only,
                                     const std::function<bool(const StrEntry*)>& is_kept)
      REQUIRES(ks_.mu);
  // A change reserved in the log, not yet written and applied (the snapshot waits).
  void BeginPending();
  void EndPending();
  // `backing`: see ApplyStored (recovery only; null for a client's store).
  Status StoreEncoded(const NsPtr& n, Side side, uint32_t layer, uint64_t start, uint64_t count,
                      std::span<const uint8_t> stored, bool log, uint64_t* lsn,
                      const std::shared_ptr<const void>* backing = nullptr);
  // The store path proper: logs the pieces (from their own bytes, no copy into a
  // staging buffer) and applies them. One piece without a chunk is StoreEncoded.
  Status StorePieces(const NsPtr& n, Side side, uint32_t layer, uint64_t start, uint64_t count,
                     std::span<const RowPiece> pieces, bool log, uint64_t* lsn,
                     const std::shared_ptr<const void>* backing);

  StoreConfig cfg_ GUARDED_BY(ks_.mu);
  MutationSink* sink_ = nullptr;
  RemovalObserver* observer_ = nullptr;
  BlockTableObserver* block_observer_ = nullptr;
  mutable base::SharedMutex gate_;
  base::Mutex reg_mu_;  // serialises OpRegister and FlushAll (held across the register's write)
  // The keys, the writers' lock (ks_.mu), the LRU clock, expiry, SCAN and
  // WATCH orders (store/keyspace.h).
  Keyspace ks_;
  base::Mutex pending_mu_;
  base::CondVar pending_cv_;
  uint64_t pending_ GUARDED_BY(pending_mu_) = 0;
  uint64_t bytes_ GUARDED_BY(ks_.mu) = 0;
  uint64_t evictions_ GUARDED_BY(ks_.mu) = 0;
  ShardedCounter total_fetches_;  // per worker: every fetch bumps it (base/sharded_counter.h)
  EvictionPool evict_pool_ GUARDED_BY(ks_.mu);  // store/eviction_pool.h
  uint64_t next_incarnation_ GUARDED_BY(ks_.mu) = 1;

  // REQUIRES sh.mu: `ns`'s non-empty block table (the namespace touched in the
  // LRU), or null (unknown, no table or zero hashes). Blocks and WithBlocks.
  const std::shared_ptr<const BlockTable>* BlocksLocked(const Shard& sh, std::string_view ns)
      REQUIRES(sh.mu);
  // ---- String keys (guarded by ks_.mu) ----
  StrEntry* StrFindLocked(std::string_view key, int64_t now_ms, uint64_t* lsn) REQUIRES(ks_.mu);
  bool IsNamespaceKeyLocked(std::string_view key) const REQUIRES(ks_.mu);
  // A new expiry (0: none) of a live key, logged (EXPIRE, GETEX), then applied.
  Status StrExpireLoggedLocked(std::string_view key, StrEntry& e, int64_t at_ms, uint64_t* lsn)
      REQUIRES(ks_.mu);
  // Removes every string key (FLUSHALL; no logging, bytes_ is reset by the caller).
  void ClearStringsLocked() REQUIRES(ks_.mu);
  // Removes every namespace and string key (FLUSHALL, live or replayed). REQUIRES: ks_.mu.
  void ClearAllLocked() REQUIRES(ks_.mu);
  // BlockTableObserver calls: the last hash of `n`'s table (none without one),
  // and a re-registration that replaces `n`'s table with `fresh`. REQUIRES ks_.mu.
  static std::optional<uint64_t> LastHash(const Namespace* n);
  void ReportTableReplaced(const Namespace& n, const BlockTable& fresh) REQUIRES(ks_.mu);
  void StrEraseLocked(StrEntry& e)
      REQUIRES(ks_.mu);  // removes a string key (not logged; takes its shard lock)
  // Logs and removes; reason 0 del, 1 eviction, 2 expiry.
  Status StrRemoveLocked(StrEntry& e, uint8_t reason, uint64_t* lsn) REQUIRES(ks_.mu);
  void CountHitOrMiss(std::string_view key, bool hit);  // a GET's, under the shard lock
  // Inserts or replaces the value (no logging, no budget check).
  StrEntry& StrPutLocked(std::string_view key, StrRef v, int64_t expire_at_ms) REQUIRES(ks_.mu);
  // The same with the key's entry already looked up under ks_.mu (`e`: nullptr
  // when the key has none), so the key is not hashed again.
  StrEntry& StrPutLocked(std::string_view key, StrRef v, int64_t expire_at_ms, StrEntry* e)
      REQUIRES(ks_.mu);
  // Reserves a STRSET record for (key, value, expire), applies it and returns
  // the pending write in *pend (to run with no lock held, see StrFinish).
  Status StrLogSetLocked(std::string_view key, const StrRef& v, int64_t expire_at_ms,
                         StrPending* pend) REQUIRES(ks_.mu);
  // The same with the key's entry already looked up under ks_.mu (`old`: nullptr
  // when the key has none), so the key is not hashed again.
  Status StrLogSetLocked(std::string_view key, const StrRef& v, int64_t expire_at_ms,
                         StrPending* pend, StrEntry* old) REQUIRES(ks_.mu);
  // Writes the pending records (no lock held) and rolls back the ones that failed.
  Status StrFinish(std::span<StrPending> pend, uint64_t* lsn);
  // Writes a small record whole, raising *lsn to its LSN.
  Status LogLocked(const persist::Record& r, uint64_t* lsn) REQUIRES(ks_.mu);
  // Slice::RoomLocked: budget for a string key going from `have` to `need` bytes.
  Status StrRoomLocked(std::string_view key, StrEntry* e, uint64_t need, uint64_t have,
                       uint64_t* lsn, bool when_over) REQUIRES(ks_.mu);
  // The namespace a key names (itself or through a session id), or nullptr.
  const NsPtr* NsOfKeyLocked(std::string_view key) const REQUIRES(ks_.mu);
  // A xorshift step of rand_state_ (RANDOMKEY).
  uint64_t NextRandomLocked() REQUIRES(ks_.mu);
  uint64_t str_bytes_ GUARDED_BY(ks_.mu) = 0;
  uint64_t expired_keys_ GUARDED_BY(ks_.mu) = 0;
  uint64_t evicted_strings_ GUARDED_BY(ks_.mu) = 0;
  EvictPolicy policy_ GUARDED_BY(ks_.mu) = EvictPolicy::kAllKeysLru;
  uint64_t rand_state_ GUARDED_BY(ks_.mu) = 0x9e3779b97f4a7c15ull;
  // Filled by CaptureSnapshot, taken by the save (TakeCapturedStrings).
  std::vector<persist::SnapshotString> captured_strings_ GUARDED_BY(ks_.mu);

  // ---- Pins and chain links (guarded by ks_.mu; store/pins.cc, store/block_links.cc) ----
  LeaseTable leases_ GUARDED_BY(ks_.mu);  // KV.BLOCK.MATCH ... PIN (store/lease_table.h)
  // Adds a pin to `e` (REQUIRES ks_.mu; takes its shard lock).
  void PinEntryLocked(StrEntry& e) REQUIRES(ks_.mu);
  // Ends one pin of a lease's key; a key whose time has passed then expires.
  void UnpinEntryLocked(StrEntry* e, uint64_t born, uint64_t* lsn) REQUIRES(ks_.mu);
  void EndLeaseLocked(uint64_t id, uint64_t* lsn) REQUIRES(ks_.mu);
  // Ends every lease whose deadline is at or before now_ms.
  void ReleaseDueLeasesLocked(int64_t now_ms, uint64_t* lsn) REQUIRES(ks_.mu);
  // An entry leaves the map: its pins go to the lease table as dead, its links are cut
  // (children become roots). REQUIRES ks_.mu, no shard lock held.
  void ForgetBlockStateLocked(StrEntry& e) REQUIRES(ks_.mu);
  // Pins and charge bookkeeping when a pinned entry's value changes.
  void PinnedChargeChangedLocked(const StrEntry& e, uint64_t old_charge, uint64_t new_charge)
      REQUIRES(ks_.mu);
  // Links `child` under `parent` (null: a root), refusing a cycle. REQUIRES ks_.mu.
  void LinkBlockLocked(StrEntry& child, StrEntry* parent) REQUIRES(ks_.mu);
  void UnlinkParentLocked(StrEntry& child) REQUIRES(ks_.mu);
  // Raises the stamps of e's ancestors to `stamp` (moving them in their
  // shards' LRU lists). REQUIRES ks_.mu, no shard lock held.
  void StampAncestorsLocked(const StrEntry& e, uint64_t stamp) REQUIRES(ks_.mu);
  // A write replaced e's value: a hash (HASHES) named the old bytes, so it
  // goes (BlockTableObserver::OnBlockKeyRemoved); the links stay. REQUIRES ks_.mu.
  void DropBlockHashLocked(StrEntry& e) REQUIRES(ks_.mu);
  // RENAME: moves e's links to `to` (the entry that replaces it).
  std::unique_ptr<BlockLinks> TakeLinksLocked(StrEntry& e) REQUIRES(ks_.mu);
  void GiveLinksLocked(StrEntry& to, std::unique_ptr<BlockLinks> links, const StrEntry* from)
      REQUIRES(ks_.mu);
  // RENAME's move of a live key to `dst` (replacing what is there), links included;
  // the caller has logged it (or is replaying the log).
  void StrMoveLocked(StrEntry& e, std::string_view dst) REQUIRES(ks_.mu);
  // KV.BLOCK.CHAIN applied (live and replayed): puts the pairs, links them and
  // gives them one stamp. REQUIRES ks_.mu; no logging, no budget.
  void ApplyChainLocked(std::span<const std::string_view> keys, std::span<const StrRef> values,
                        StrEntry* after, int64_t expire_at_ms, std::span<const uint64_t> hashes,
                        uint32_t tokens) REQUIRES(ks_.mu);
  // ---- Disk tier (store/tiering.cc) ----
  // A value on disk read with one checked direct read (blocking: the paths
  // that cannot defer); a damaged one is dropped (nullptr). No lock held.
  Result<StrRef> LoadTieredSync(std::string_view key, const StrRef& v);
  // Reads the extent of `v` and counts the read. Any thread, no lock.
  Result<StrRef> TierReadCounted(std::string_view key, const StrRef& v);
  // Starts a read of `x` through the calling thread's ring (a worker's), the
  // result counted as TierReadExtent counts; false when there is no ring here,
  // the extent is too big for one or the ring is full (`done` is then kept).
  bool TierReadOnRing(std::string what, const tier::ExtentRef& x,
                      std::function<void(Result<OwnedBuffer> buf, size_t at)>& done);
  std::shared_ptr<tier::TierFile> tier_;
  // Moves whose write finished (store/tier_jobs.h), applied by the next holder
  // of ks_.mu (TierApplyDoneLocked): an I/O thread never waits for ks_.mu.
  base::Mutex tier_done_mu_;
  std::vector<TierDone> tier_done_ GUARDED_BY(tier_done_mu_);
  void TierApplyDoneLocked() REQUIRES(ks_.mu);
  // Namespaces (store/tier_namespaces.cc).
  std::vector<TierNsDone> tier_ns_done_ GUARDED_BY(tier_done_mu_);
  uint64_t tier_uncharged_ GUARDED_BY(ks_.mu) = 0;  // sum of Namespace::tier_uncharged
  bool TierMoveNamespaceLocked(const std::shared_ptr<Namespace>& n, uint64_t* lsn) REQUIRES(ks_.mu);
  void TierNamespaceWrite(TierNsDone job);
  void TierApplyNsDoneLocked(std::vector<TierNsDone>& done) REQUIRES(ks_.mu);
  // A write to a tiered namespace charges its rows to RAM again (its chunks
  // keep reading the tier until they are rewritten or the next read promotes
  // them). REQUIRES ks_.mu.
  void UntierNamespaceLocked(Namespace& n) REQUIRES(ks_.mu);
  // Before a read (V.FETCH, WARM) of a namespace whose chunks borrow the tier's
  // mapping: one checked direct read of its extent, whose buffer the chunks then
  // borrow (a promotion, charged to RAM again) when it fits the budget after colder
  // RAM entries moved to the tier, else the read uses the mapping just checked. A
  // damaged extent drops the namespace as the tier drops entries (NotFound);
  // another read error is returned and changes nothing.
  Status CheckTieredNamespace(const std::shared_ptr<Namespace>& n);
  // Whether a fetch of `n` must check its extent first (not when this thread
  // runs under a TierCheckedScope of it).
  static bool NeedsTierCheck(const Namespace& n);
  // Moves colder RAM entries (stamp below `stamp`, never `keep`) to the tier
  // until `need` more bytes fit the budget; false when they cannot.
  bool TierRoomLocked(uint64_t need, const Namespace* keep, uint64_t stamp) REQUIRES(ks_.mu);
  StrEntry* OldestTierMovableLocked()
      REQUIRES(ks_.mu);  // the coldest RAM string that may move, or null
  // A checked direct read of an extent, counted (tier_reads, latency) and, on
  // failure, counted in tier_errors and logged with the file and offset.
  Result<OwnedBuffer> TierReadExtent(std::string_view what, const tier::Extent& x, size_t* at);
  // TierReadExtent's accounting of a read that started at `t0_us`.
  Result<OwnedBuffer> TierReadCount(std::string_view what, const tier::Extent& x, uint64_t t0_us,
                                    Result<OwnedBuffer> buf);
  // A RAM eviction candidate: not on disk, every child on disk (leaves first).
  bool RamCandidateLocked(const Namespace& n) const REQUIRES(ks_.mu);
  std::shared_ptr<Namespace> OldestTieredNamespaceLocked() const
      REQUIRES(ks_.mu);  // coldest tiered leaf
  std::unique_ptr<base::ThreadPool> tier_io_;
  std::atomic<uint64_t> tier_min_value_{64 * 1024};
  uint64_t tier_entries_ GUARDED_BY(ks_.mu) = 0;
  // The extents the snapshot in place references (see SetSnapshotTierPins).
  std::vector<std::shared_ptr<const void>> snapshot_tier_pins_ GUARDED_BY(ks_.mu);
  // Counters (INFO tier_*), the write back-pressure and the pause after a
  // failed write (store/tier_counters.h).
  TierCounters tier_counters_;
  TierBacklog tier_backlog_;
  // Moves e's value to the tier (its write queued to an I/O thread); false
  // when it cannot go there (no tier, too small, already there, no room even
  // after the tier dropped its coldest). REQUIRES ks_.mu, no shard lock.
  bool TierMoveLocked(StrEntry& e, uint64_t* lsn) REQUIRES(ks_.mu);
  // Drops the tier's least recently used entry (not `keep`); false if none.
  bool TierDropOldestLocked(const StrEntry* keep, uint64_t* lsn) REQUIRES(ks_.mu);
  void TierWrite(std::string key, StrRef ram, StrRef moving);  // the I/O thread's half of a move
  // Whether a key may move to the tier (its value is eligible and nothing holds it in RAM).
  bool TierMovableLocked(const StrEntry& e) const REQUIRES(ks_.mu);
  // Whether eviction passes over a string key.
  static bool EvictionExempt(const StrEntry& e) { return e.pins > 0 || e.held || e.HasChildren(); }
};

}  // namespace pion::store
