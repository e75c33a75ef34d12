// String keys inside the store: their charges, lazy expiry, puts, removals
// and logging (the primitives store/slice.h hands the operations of
// store/string_ops.h and store/key_ops.h), and their recovery. The map, LRU
// lists and the expiry and scan orders they live in are the keyspace's
// (store/keyspace.h). See docs/ARCHITECTURE.md "Store".
//
// Logging: small records (DEL, EXPIRE, RENAME) are written under ks_.mu like a
// namespace drop. A STRSET is reserved under ks_.mu (fixing its LSN, so records
// of one key replay in the order they were applied), applied at once, and its
// value written to the log after ks_.mu is released, inside a pending change (the
// snapshot barrier waits for it). If that write fails the change is rolled
// back (the previous value restored) unless a later write replaced it; the
// client gets the error. Between apply and rollback another client may have
// read the value (the only state the log may briefly not hold).

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <shared_mutex>

#include "base/check.h"
#include "base/clock.h"
#include "base/keyslot.h"
#include "base/strutil.h"
#include "store/expiry.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

const char* EvictPolicyName(EvictPolicy p) {
  switch (p) {
    case EvictPolicy::kAllKeysLru:
      return "allkeys-lru";
    case EvictPolicy::kNoEviction:
      return "noeviction";
    case EvictPolicy::kVolatileLru:
      return "volatile-lru";
    case EvictPolicy::kAllKeysRandom:
      return "allkeys-random";
    case EvictPolicy::kAllKeysLfu:
      return "allkeys-lfu";
    case EvictPolicy::kVolatileLfu:
      return "volatile-lfu";
    case EvictPolicy::kVolatileRandom:
      return "volatile-random";
    case EvictPolicy::kVolatileTtl:
      return "volatile-ttl";
  }
  return "allkeys-lru";
}

bool ParseEvictPolicy(std::string_view s, EvictPolicy* out) {
  for (EvictPolicy p :
       {EvictPolicy::kAllKeysLru, EvictPolicy::kNoEviction, EvictPolicy::kVolatileLru,
        EvictPolicy::kAllKeysRandom, EvictPolicy::kAllKeysLfu, EvictPolicy::kVolatileLfu,
        EvictPolicy::kVolatileRandom, EvictPolicy::kVolatileTtl}) {
    if (EqualsIgnoreCase(s, EvictPolicyName(p))) {
      *out = p;
      return true;
    }
  }
  return false;
}

// ---- internals (REQUIRE ks_.mu) ----

bool Store::IsNamespaceKeyLocked(std::string_view key) const {
  if (NsFindLocked(key) != nullptr) return true;
  std::string_view ns;
  Side side;
  return ParseSessionId(key, &ns, &side) && NsFindLocked(ns) != nullptr;
}

void Store::StrEraseLocked(StrEntry& e) {
  if (e.pins > 0 || e.block) ForgetBlockStateLocked(e);
  Shard& sh = ks_.ShardFor(*e.key);
  base::MutexLock sl(&sh.mu);
  if (e.tiered) --tier_entries_;
  const uint64_t charge = StrCharge(*e.key, e.value);
  bytes_ -= charge;
  str_bytes_ -= charge;
  ks_.EraseStringLocked(sh, e);
}

void Store::ClearStringsLocked() {
  ks_.ClearStringsLocked();
  str_bytes_ = 0;
  tier_entries_ = 0;
  // Every pinned key is gone: the leases live on, pinning nothing (pins.cc).
  leases_.EndEpoch();
}

Status Store::StrRemoveLocked(StrEntry& e, uint8_t reason, uint64_t* lsn) {
  PION_RETURN_IF_ERROR(LogLocked(persist::StrDelRec{*e.key, reason}, lsn));
  if (reason == 2) ++expired_keys_;
  if (observer_ != nullptr && reason != 0) observer_->OnStringRemoved(*e.key, reason == 1);
  StrEraseLocked(e);
  return Status::OK();
}

StrEntry& Store::StrPutLocked(std::string_view key, StrRef v, int64_t expire_at_ms) {
  return StrPutLocked(key, std::move(v), expire_at_ms, ks_.FindStringLocked(key));
}

StrEntry& Store::StrPutLocked(std::string_view key, StrRef v, int64_t expire_at_ms,
                              StrEntry* found) {
  Shard& sh = ks_.ShardFor(key);
  base::MutexLock sl(&sh.mu);
  const bool fresh = found == nullptr;
  if (found == nullptr) {
    found = &ks_.InsertStringLocked(sh, key);
    found->born = leases_.NextBorn();
  } else {
    uint64_t old = StrCharge(key, found->value);
    bytes_ -= old;
    str_bytes_ -= old;
  }
  StrEntry& e = *found;
  const uint64_t old_charge = e.value ? StrCharge(key, e.value) : 0;
  if (e.tiered != (v && v->tiered())) {  // between the RAM and the tier lists
    sh.Unlink(e);
    e.tiered = !e.tiered;
    sh.Link(e);
    e.tiered ? ++tier_entries_ : --tier_entries_;
  }
  e.value = std::move(v);
  uint64_t charge = StrCharge(key, e.value);
  if (e.pins > 0) PinnedChargeChangedLocked(e, old_charge, charge);
  bytes_ += charge;
  str_bytes_ += charge;
  e.version = ks_.NextVersionLocked();
  ks_.SetExpireLocked(e, expire_at_ms);
  ks_.TouchLocked(sh, e);
  if (fresh) Keyspace::LfuInit(e);  // a new key starts at Redis's initial LFU counter
  return e;
}

StrEntry* Store::StrFindLocked(std::string_view key, int64_t now_ms, uint64_t* lsn) {
  StrEntry* e = ks_.FindStringLocked(key);
  if (e == nullptr) return nullptr;
  if (Expired(*e, now_ms)) {
    uint64_t unused = 0;
    // A failed log write keeps the key (still expired: reads skip it next time too).
    if (!StrRemoveLocked(*e, 2, lsn != nullptr ? lsn : &unused).ok()) return nullptr;
    return nullptr;
  }
  return e;
}

Status Store::StrLogSetLocked(std::string_view key, const StrRef& v, int64_t expire_at_ms,
                              StrPending* pend) {
  return StrLogSetLocked(key, v, expire_at_ms, pend, ks_.FindStringLocked(key));
}

Status Store::StrLogSetLocked(std::string_view key, const StrRef& v, int64_t expire_at_ms,
                              StrPending* pend, StrEntry* old) {
  const persist::StrSetRec rec{.key = key, .expire_at_ms = expire_at_ms, .value_len = v->size};
  if (sink_) PION_RETURN_IF_ERROR(sink_->Reserve(rec, &pend->rec).status());
  pend->key = key;
  pend->value = v;
  if (old != nullptr) {
    pend->had_previous = true;
    pend->previous = old->value;
    pend->previous_expire = old->expire_at_ms;
  }
  StrPutLocked(key, v, expire_at_ms, old);
  return Status::OK();
}

Status Store::StrFinish(std::span<StrPending> pend, uint64_t* lsn) {
  Status first;
  for (StrPending& p : pend) {
    if (!p.rec.write) continue;
    auto r = p.rec.write(std::span<const uint8_t>(p.value->data, p.value->size));
    if (r.ok()) {
      *lsn = std::max(*lsn, *r);
      continue;
    }
    if (first.ok()) first = r.status();
    base::MutexLock l(&ks_.mu);
    StrEntry* e = ks_.FindStringLocked(p.key);
    if (e == nullptr || e->value != p.value) continue;  // replaced since
    if (p.had_previous)
      StrPutLocked(p.key, p.previous, p.previous_expire);
    else
      StrEraseLocked(*e);
  }
  for (size_t i = 0; i < pend.size(); ++i) EndPending();
  return first;
}

Status Store::StrExpireLoggedLocked(std::string_view key, StrEntry& e, int64_t at_ms,
                                    uint64_t* lsn) {
  PION_RETURN_IF_ERROR(LogLocked(persist::StrExpireRec{key, at_ms}, lsn));
  ks_.SetExpireShardLocked(e, at_ms);
  e.version = ks_.NextVersionLocked();
  return Status::OK();
}

void Store::CountHitOrMiss(std::string_view key, bool hit) {
  Shard& sh = ks_.ShardFor(key);
  base::MutexLock sl(&sh.mu);
  ++(hit ? sh.hits : sh.misses);
}

Status Store::LogLocked(const persist::Record& r, uint64_t* lsn) {
  if (sink_ == nullptr) return Status::OK();
  auto w = sink_->Log(r);
  if (!w.ok()) return w.status();
  *lsn = std::max(*lsn, *w);
  return Status::OK();
}

Status Store::StrRoomLocked(std::string_view key, StrEntry* e, uint64_t need, uint64_t have,
                            uint64_t* lsn, bool when_over) {
  if (cfg_.max_bytes == 0 || (need <= have && !(when_over && bytes_ > cfg_.max_bytes)))
    return Status::OK();
  if (need > cfg_.max_bytes) return Status::OutOfBudget("");
  // The key is held while others go: neither evicted nor dropped by a full
  // disk tier making room for a move (TierDropOldestLocked), so the caller's
  // entry stays valid across this call.
  const bool hold = e != nullptr && !e->held;
  if (hold) e->held = true;
  Status st = EvictLocked(
      nullptr,
      [&]() REQUIRES(ks_.mu) { return bytes_ - std::min(have, bytes_) + need <= cfg_.max_bytes; },
      lsn, key, true);
  if (hold) e->held = false;
  return st;
}

const NsPtr* Store::NsOfKeyLocked(std::string_view key) const {
  if (const NsPtr* n = NsRefLocked(key)) return n;
  std::string_view ns;
  Side side;
  return ParseSessionId(key, &ns, &side) ? NsRefLocked(ns) : nullptr;
}

uint64_t Store::NextRandomLocked() {
  rand_state_ ^= rand_state_ << 13;
  rand_state_ ^= rand_state_ >> 7;
  rand_state_ ^= rand_state_ << 17;
  return rand_state_;
}

// ---- recovery ----

void Store::ApplyStrSet(std::string_view key, int64_t expire_at_ms, uint64_t lru_stamp,
                        std::span<const uint8_t> value) {
  base::MutexLock l(&ks_.mu);
  if (expire_at_ms != 0 && expire_at_ms <= UnixMillis()) {
    if (StrEntry* e = ks_.FindStringLocked(key)) StrEraseLocked(*e);
    return;
  }
  auto v =
      StrValue::Copy(std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
  PION_CHECK(v != nullptr);
  if (IsNamespaceKeyLocked(key)) return;  // cannot happen in a log the server wrote
  uint64_t need = StrCharge(key, v);
  if (cfg_.max_bytes > 0) {
    uint64_t unused = 0;
    const StrEntry* old = ks_.FindStringLocked(key);
    uint64_t have = old != nullptr ? StrCharge(key, old->value) : 0;
    (void)EvictLocked(
        nullptr, [&]() REQUIRES(ks_.mu) { return bytes_ - have + need <= cfg_.max_bytes; }, &unused,
        key, true);
  }
  StrEntry& e = StrPutLocked(key, std::move(v), expire_at_ms);
  if (lru_stamp != 0) {
    {
      Shard& sh = ks_.ShardFor(key);
      base::MutexLock sl(&sh.mu);
      e.stamp = lru_stamp;
    }
    ks_.RaiseClockAbove(lru_stamp);
  }
}

void Store::ApplyStrDel(std::string_view key) {
  base::MutexLock l(&ks_.mu);
  if (StrEntry* e = ks_.FindStringLocked(key)) StrEraseLocked(*e);
}

void Store::ApplyStrExpire(std::string_view key, int64_t expire_at_ms) {
  base::MutexLock l(&ks_.mu);
  StrEntry* e = ks_.FindStringLocked(key);
  if (e == nullptr) return;
  if (expire_at_ms != 0 && expire_at_ms <= UnixMillis()) {
    StrEraseLocked(*e);
    return;
  }
  ks_.SetExpireShardLocked(*e, expire_at_ms);
}

void Store::ApplyStrRename(std::string_view src, std::string_view dst) {
  base::MutexLock l(&ks_.mu);
  StrEntry* e = ks_.FindStringLocked(src);
  if (e == nullptr || src == dst) return;
  StrMoveLocked(*e, dst);
}

void Store::StrMoveLocked(StrEntry& e, std::string_view dst) {
  StrRef v = e.value;
  int64_t expire = e.expire_at_ms;
  // A block's links move with it (the destination's own go with it first).
  if (StrEntry* old = ks_.FindStringLocked(dst)) StrEraseLocked(*old);
  std::unique_ptr<BlockLinks> links = TakeLinksLocked(e);
  StrEraseLocked(e);
  GiveLinksLocked(StrPutLocked(dst, std::move(v), expire), std::move(links), &e);
}

void Store::ApplyStrPatch(std::string_view key, int64_t expire_at_ms, uint64_t offset,
                          std::span<const uint8_t> bytes, bool truncate) {
  base::MutexLock l(&ks_.mu);
  StrEntry* e = ks_.FindStringLocked(key);
  if (expire_at_ms != 0 && expire_at_ms <= UnixMillis()) {
    if (e != nullptr) StrEraseLocked(*e);
    return;
  }
  if (IsNamespaceKeyLocked(key)) return;  // cannot happen in a log the server wrote
  std::string_view cur = e != nullptr ? e->value->view() : std::string_view();
  uint64_t end = offset + bytes.size();
  uint64_t new_len = truncate ? end : std::max<uint64_t>(cur.size(), end);
  if (e != nullptr && !e->value->tiered() && e->value.use_count() == 1 &&
      new_len <= e->value->capacity) {
    // In place, as live (a replayed run of appends stays linear).
    Shard& sh = ks_.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    StrValue* v = const_cast<StrValue*>(e->value.get());
    if (offset > v->size) std::memset(v->data + v->size, 0, offset - v->size);
    if (!bytes.empty()) std::memcpy(v->data + offset, bytes.data(), bytes.size());
    v->size = new_len;
    v->edited = true;
    ks_.SetExpireLocked(*e, expire_at_ms);
    return;
  }
  auto v =
      StrValue::TryMake(e != nullptr && new_len > cur.size() ? StrGrowCapacity(new_len) : new_len);
  PION_CHECK(v != nullptr);
  uint64_t keep = std::min<uint64_t>(cur.size(), new_len);
  if (keep > 0) std::memcpy(v->data, cur.data(), keep);
  if (offset > keep) std::memset(v->data + keep, 0, offset - keep);
  if (!bytes.empty()) std::memcpy(v->data + offset, bytes.data(), bytes.size());
  v->size = new_len;
  v->edited = e != nullptr;
  if (cfg_.max_bytes > 0) {
    uint64_t unused = 0, need = StrCharge(key, v);
    uint64_t have = e != nullptr ? StrCharge(key, e->value) : 0;
    (void)EvictLocked(
        nullptr, [&]() REQUIRES(ks_.mu) { return bytes_ - have + need <= cfg_.max_bytes; }, &unused,
        key, true);
  }
  StrPutLocked(key, std::move(v), expire_at_ms, e);
}

std::vector<persist::SnapshotString> Store::TakeCapturedStrings() {
  base::MutexLock l(&ks_.mu);
  return std::move(captured_strings_);
}

}  // namespace pion::store
