// The keyspace's KV.BLOCK pins (docs/protocol.md "Blocks", store.h "Blocks"):
// what KV.BLOCK.MATCH ... PIN and UNPIN (store/block_match.cc) work with.
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
#include <optional>

#include "base/check.h"
#include "base/clock.h"
#include "store/expiry.h"
#include "store/store.h"

namespace pion::store {

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

Store::PinStats Store::PinStatsNow() const {
  base::MutexLock l(&ks_.mu);
  return leases_.Stats();
}

void Store::SetMaxBlockLeases(uint64_t n) {
  base::MutexLock l(&ks_.mu);
  leases_.set_max_leases(n);
}

}  // namespace pion::store
