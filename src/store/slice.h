// The keyspace as its operations see it (Dragonfly's DbSlice): the
// primitives the string, key, prefix and block operations
// (store/string_ops.h, store/key_ops.h, store/prefix_ops.h,
// store/block_ops.h) are written in. A Slice is a view of one Store, a pointer
// wide, made where an operation is called (OpArgs{*store, &lsn}); it owns
// nothing. The operations themselves are free functions over it, so a new
// command is a function in its own file, not a member of Store.
//
// What a Slice gives, and the locks each part needs (store.h's order: gate
// shared -> ks.mu -> one shard's lock):
//  * `ks`: the keyspace (shards, LRU clock, expiry and scan orders, WATCH
//    versions; store/keyspace.h), and its writers' lock ks.mu;
//  * gate(): the snapshot barrier, held shared by every mutation while it
//    reserves its log record;
//  * lookups with lazy expiry (an expired key found is removed and logged);
//  * the byte budget (Room: eviction by the maxmemory policy);
//  * logging: a STRSET reserved and applied under ks.mu and written after it
//    is released (LogSetLocked, BeginPending, then Finish with no lock held),
//    and small records written whole under ks.mu (LogLocked);
//  * the namespaces a key may name (a namespace or one of its session ids);
//  * the namespace map, the registrations' lock, the byte and session
//    budget, the two-phase log append and the rows' write (the prefix
//    operations);
//  * the KV.BLOCK leases and pins, and a chain's apply (the block operations);
//  * the disk tier's checked read of a value that lives there, and its check
//    of a namespace before a fetch.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "store/keyspace.h"
#include "store/reason.h"
#include "store/store.h"
#include "store/strings.h"

namespace pion::store {

class Slice {
 public:
  // Implicit, so an operation's arguments read OpArgs{*store, &lsn}.
  Slice(Store& s) : ks(s.ks_), st_(&s) {}  // NOLINT(google-explicit-constructor)

  Keyspace& ks;

  base::SharedMutex& gate() const RETURN_CAPABILITY(st_->gate_) { return st_->gate_; }

  // ---- Lookups ----
  // A live string key's entry, or nullptr; an expired one found is removed
  // (logged as an expiry, its LSN raised into *lsn when lsn is not null).
  StrEntry* FindLocked(std::string_view key, int64_t now_ms, uint64_t* lsn) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    uint64_t unused = 0;
    return st_->StrFindLocked(key, now_ms, lsn != nullptr ? lsn : &unused);
  }
  // Whether `key` names a namespace or one of its session ids: under ks.mu,
  // or taking the shard locks one at a time (a reader's check).
  bool IsNamespaceKeyLocked(std::string_view key) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->IsNamespaceKeyLocked(key);
  }
  bool IsNamespaceKeyShared(std::string_view key) const { return st_->IsNamespaceKeyShared(key); }
  // The namespace `key` names (itself or through a session id), or nullptr.
  const NsPtr* NamespaceOfKeyLocked(std::string_view key) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->NsOfKeyLocked(key);
  }
  // The namespace of that name (no session id), or nullptr.
  const Namespace* NamespaceLocked(std::string_view ns) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->NsFindLocked(ns);
  }
  // A GET's hit or miss, counted under the key's shard lock.
  void CountHitOrMiss(std::string_view key, bool hit) const { st_->CountHitOrMiss(key, hit); }
  // String keys and namespaces now.
  uint64_t StringCountLocked() const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->StrCountLocked();
  }
  uint64_t NamespaceCountLocked() const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->NsCountLocked();
  }
  // The next of the keyspace's pseudo-random numbers (RANDOMKEY).
  uint64_t NextRandomLocked() const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->NextRandomLocked();
  }

  // ---- The byte budget ----
  // Makes room for a write that takes a key from `have` charged bytes to
  // `need` (StrCharge): with a budget, when it grows (or, with `when_over`,
  // also while used memory is over the budget, as Redis refuses every write
  // then), evicts by the policy, never `key`; OutOfBudget when `need` alone is
  // over the budget or eviction cannot free enough. `e` is `key`'s entry as
  // looked up under ks.mu (nullptr: none); it stays where it is (neither
  // evicted nor dropped from the disk tier).
  Status RoomLocked(std::string_view key, StrEntry* e, uint64_t need, uint64_t have, uint64_t* lsn,
                    bool when_over = false) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->StrRoomLocked(key, e, need, have, lsn, when_over);
  }

  // ---- Writes ----
  // Reserves a STRSET of (key, v, expire) and applies it (StrPending: the
  // write to finish with no lock held). Each success is followed by one
  // BeginPending, and the pending changes go to Finish, which writes them
  // (rolling back those whose write failed) and ends them.
  Status LogSetLocked(std::string_view key, const StrRef& v, int64_t expire_at_ms,
                      StrPending* pend) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->StrLogSetLocked(key, v, expire_at_ms, pend);
  }
  // The same for a key whose entry `e` (nullptr: none) was looked up since
  // ks.mu was taken (FindLocked), so it is not looked up again. Eviction
  // between the two never removes the key written (RoomLocked keeps it).
  Status LogSetLocked(std::string_view key, const StrRef& v, int64_t expire_at_ms, StrPending* pend,
                      StrEntry* e) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->StrLogSetLocked(key, v, expire_at_ms, pend, e);
  }
  void BeginPending() const { st_->BeginPending(); }
  Status Finish(std::span<StrPending> pend, uint64_t* lsn) const {
    return st_->StrFinish(pend, lsn);
  }
  // Writes a small record whole (STRPATCH, STRRENAME...), its LSN raised into *lsn.
  Status LogLocked(const persist::Record& r, uint64_t* lsn) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->LogLocked(r, lsn);
  }
  // Puts a value (not logged, no budget check): `e` is the key's entry looked
  // up under ks.mu, or nullptr when it has none.
  StrEntry& PutLocked(std::string_view key, StrRef v, int64_t expire_at_ms, StrEntry* e) const
      REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->StrPutLocked(key, std::move(v), expire_at_ms, e);
  }
  // Logs and removes a string key: reason 0 DEL, 1 eviction, 2 expiry.
  Status RemoveLocked(StrEntry& e, uint8_t reason, uint64_t* lsn) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->StrRemoveLocked(e, reason, lsn);
  }
  // Logs a live key's new expiry (0: none) and applies it (a new WATCH version).
  Status ExpireLoggedLocked(std::string_view key, StrEntry& e, int64_t at_ms, uint64_t* lsn) const
      REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->StrExpireLoggedLocked(key, e, at_ms, lsn);
  }
  // RENAME's move of a live key to `dst` (replacing what is there), block
  // links included; the caller has logged it.
  void MoveLocked(StrEntry& e, std::string_view dst) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    st_->StrMoveLocked(e, dst);
  }
  // A read of a block key with a parent stamps its ancestors with its stamp
  // (no shard lock held).
  void StampAncestorsLocked(const StrEntry& e, uint64_t stamp) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    st_->StampAncestorsLocked(e, stamp);
  }
  // Removes a namespace with its subtree (DEL of a namespace key), each counted
  // in *removed; and the check DEL asks of every namespace it would remove.
  Status DropNamespaceLocked(const NsPtr& n, uint64_t* lsn, uint64_t* removed) const
      REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->RemoveSubtreeLocked(n, DropReason::kDrop, lsn, removed);
  }
  static Status AskSubtrees(std::vector<const Namespace*> todo,
                            const std::function<bool(std::string_view ns)>& may_drop) {
    return Store::AskSubtrees(std::move(todo), may_drop);
  }

  // ---- Namespaces (the prefix operations, store/prefix_ops.h) ----
  // The namespace of that name, referenced, taking only its shard's lock; or
  // null. FindAndTouch also touches it in the LRU (and so its ancestors).
  NsPtr Find(std::string_view ns) const { return st_->Find(ns); }
  NsPtr FindAndTouch(std::string_view ns) const { return st_->FindAndTouch(ns); }
  void Touch(Namespace& n) const { st_->Touch(n); }
  // The entry of that name in the namespace map, or nullptr.
  const NsPtr* NamespaceRefLocked(std::string_view ns) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->NsRefLocked(ns);
  }
  // Under the shard's lock: `ns`'s non-empty block table (the namespace
  // touched in the LRU), or null (unknown, no table or zero hashes).
  const std::shared_ptr<const BlockTable>* BlocksLocked(const Shard& sh, std::string_view ns) const
      REQUIRES(sh.mu) {
    return st_->BlocksLocked(sh, ns);
  }
  // The store's limits (sessions, chain length, bytes).
  const StoreConfig& ConfigLocked() const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->cfg_;
  }
  // Bytes charged to RAM (rows and block tables of the namespaces).
  uint64_t ChargedLocked() const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->bytes_;
  }
  // Adds `delta` (modulo 2^64: may take away) to the charged total and to `n`'s own.
  void ChargeLocked(Namespace* n, uint64_t delta) const REQUIRES(ks.mu);
  // Evicts by the maxmemory policy until `fits` holds, never `keep` or its
  // ancestors (EvictNamespaces: only namespaces, the session cap).
  Status EvictLocked(const Namespace* keep, const std::function<bool()>& fits, uint64_t* lsn) const
      REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->EvictLocked(keep, fits, lsn);
  }
  Status EvictNamespacesLocked(const Namespace* keep, const std::function<bool()>& fits,
                               uint64_t* lsn) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->EvictNamespacesLocked(keep, fits, lsn);
  }
  uint64_t NextIncarnationLocked() const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->next_incarnation_++;
  }
  // The registrations' lock: held across a registration's log write, so no
  // other change to the namespace map comes between its log position and
  // its apply (FLUSHALL takes it too).
  base::Mutex& registry_mu() const RETURN_CAPABILITY(st_->reg_mu_) { return st_->reg_mu_; }
  // Whether mutations are logged, and the first half of a two-phase append
  // (the record's body written later with no lock held: PendingRecord::write).
  bool logging() const { return st_->sink_ != nullptr; }
  Status ReserveLocked(const persist::Record& r, PendingRecord* rec) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->sink_->Reserve(r, rec).status();
  }
  void EndPending() const { st_->EndPending(); }
  // A write to a namespace whose rows are on the disk tier charges them to RAM again.
  void UntierLocked(Namespace& n) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    st_->UntierNamespaceLocked(n);
  }
  // Tells the block-table observer (KV events, the router's index) of a new
  // namespace's table (after `parent`'s) or of `n`'s table replaced by `fresh`.
  void ReportTableStoredLocked(const BlockTable& t, const Namespace* parent) const REQUIRES(ks.mu);
  void ReportTableReplacedLocked(const Namespace& n, const BlockTable& fresh) const
      REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    if (st_->block_observer_) st_->ReportTableReplaced(n, fresh);
  }
  // Puts a new namespace in the map (it is not there).
  void InsertLocked(NsPtr n) const REQUIRES(ks.mu);
  // Before a fetch: a namespace whose chunks borrow the disk tier's mapping
  // has its extent checked (and promoted when it fits); a damaged one is
  // dropped (NotFound).
  Status CheckTier(const NsPtr& n) const {
    return Store::NeedsTierCheck(*n) ? st_->CheckTieredNamespace(n) : Status::OK();
  }
  // Rows requested by fetches (INFO total_fetches).
  void CountFetches(uint64_t rows) const { st_->total_fetches_.Add(rows); }
  // The rows' write: reserves the budget and the log record under the side
  // lock, writes the pieces' bytes to the log with no lock held and applies
  // them in reservation order (store.h "Store").
  Status WriteRows(const NsPtr& n, Side side, uint32_t layer, uint64_t start, uint64_t count,
                   std::span<const RowPiece> pieces, uint64_t* lsn) const {
    return st_->StorePieces(n, side, layer, start, count, pieces, true, lsn, nullptr);
  }

  // ---- Blocks: pins and chains (the block operations, store/block_ops.h) ----
  // The KV.BLOCK.MATCH ... PIN leases (store/lease_table.h).
  LeaseTable& LeasesLocked() const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    return st_->leases_;
  }
  // Ends every lease whose deadline is at or before now_ms (a key whose time
  // passed while pinned expires then, logged).
  void ReleaseDueLeasesLocked(int64_t now_ms) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    uint64_t unused = 0;
    st_->ReleaseDueLeasesLocked(now_ms, &unused);
  }
  // Adds a pin to a live key (no shard lock held), and ends one lease's pins.
  void PinLocked(StrEntry& e) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    st_->PinEntryLocked(e);
  }
  void EndLeaseLocked(uint64_t id) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    uint64_t unused = 0;
    st_->EndLeaseLocked(id, &unused);
  }
  // A KV.BLOCK.CHAIN applied: puts the pairs, links them (the first under
  // `after`, null: a root) and gives them one stamp; not logged, no budget.
  void ApplyChainLocked(std::span<const std::string_view> keys, std::span<const StrRef> values,
                        StrEntry* after, int64_t expire_at_ms, std::span<const uint64_t> hashes,
                        uint32_t tokens) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    st_->ApplyChainLocked(keys, values, after, expire_at_ms, hashes, tokens);
  }
  // Removes a string key without logging it (a write whose record failed, undone).
  void EraseLocked(StrEntry& e) const REQUIRES(ks.mu) {
    st_->ks_.mu.AssertHeld();
    st_->StrEraseLocked(e);
  }

  // ---- The disk tier ----
  bool has_tier() const { return st_->tier_ != nullptr; }
  // A value on disk read with one checked direct read (blocking); a damaged
  // one is dropped (nullptr). No lock held.
  Result<StrRef> LoadTiered(std::string_view key, const StrRef& v) const {
    return st_->LoadTieredSync(key, v);
  }

 private:
  Store* st_;
};

// OK, or InvalidArgument kKeyTooLong for a key longer than kMaxStrKeyBytes
// (what an operation that creates a key checks first).
inline Status CheckKeyLength(std::string_view key) {
  if (key.size() <= kMaxStrKeyBytes) return Status::OK();
  return Status(Code::kInvalidArgument, Reason::kKeyTooLong, {}, "key too long");
}

// What every operation takes first: the slice it works on and where it
// reports the largest LSN it appended (0: nothing logged; the caller waits
// for it before acknowledging). Reads may leave lsn null: what their lazy
// expiry logs needs no wait.
struct OpArgs {
  Slice slice;
  uint64_t* lsn = nullptr;
};

}  // namespace pion::store
