// String keys: their values, charges, lazy expiry, reads and writes, and
// their logging. The map, LRU lists and the expiry and scan orders they live
// in are the keyspace's (store/keyspace.h). See store.h ("String keys") and
// docs/ARCHITECTURE.md "Store".
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
  if (sink_) {
    auto r = sink_->Log(persist::StrDelRec{*e.key, reason});
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
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
  const persist::StrSetRec rec{.key = key, .expire_at_ms = expire_at_ms, .value_len = v->size};
  if (sink_) PION_RETURN_IF_ERROR(sink_->Reserve(rec, &pend->rec).status());
  StrEntry* old = ks_.FindStringLocked(key);
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

// ---- commands ----

Result<SetOutcome> Store::StrSet(std::string_view key, StrRef value, const SetOptions& o,
                                 uint64_t* lsn) {
  *lsn = 0;
  if (key.size() > kMaxStrKeyBytes)
    return Status(Code::kInvalidArgument, Reason::kKeyTooLong, {}, "key too long");
  SetOutcome out;
  StrPending pend[1];  // on the stack: no allocation per SET
  {
    base::ReaderLock gate(&gate_);
    base::MutexLock l(&ks_.mu);
    if (IsNamespaceKeyLocked(key)) return Status::WrongType();
    int64_t now = UnixMillis();
    StrEntry* e = StrFindLocked(key, now, lsn);
    if (o.want_old && e != nullptr) out.old = e->value;
    if ((o.cond == SetOptions::Cond::kNx && e != nullptr) ||
        (o.cond == SetOptions::Cond::kXx && e == nullptr))
      return out;
    int64_t expire = o.expire_at_ms;
    if (o.keep_ttl && e != nullptr) expire = e->expire_at_ms;
    uint64_t need = StrCharge(key, value);
    uint64_t have = e != nullptr ? StrCharge(key, e->value) : 0;
    // As Redis: a write while used memory is over maxmemory (a budget just
    // lowered under noeviction) is refused even when it would not grow it.
    if (cfg_.max_bytes > 0 && (need > have || bytes_ > cfg_.max_bytes)) {
      if (need > cfg_.max_bytes) return Status::OutOfBudget("");
      PION_RETURN_IF_ERROR(EvictLocked(
          nullptr, [&]() REQUIRES(ks_.mu) { return bytes_ - have + need <= cfg_.max_bytes; }, lsn,
          key, true));
    }
    PION_RETURN_IF_ERROR(StrLogSetLocked(key, value, expire, &pend[0]));
    BeginPending();
    out.done = true;
  }
  PION_RETURN_IF_ERROR(StrFinish(pend, lsn));
  return out;
}

Result<StrRef> Store::StrGet(std::string_view key) {
  StrRef out;
  PION_RETURN_IF_ERROR(StrGetWith(key, [&out](const StrRef& v) { out = v; }));
  return out;
}

Status Store::StrGetWith(std::string_view key, const std::function<void(const StrRef&)>& fn,
                         bool tiered_as_is) {
  if (!tier_ || tiered_as_is) return StrGetWithRaw(key, fn);
  StrRef disk;
  Status st = StrGetWithRaw(key, [&disk, &fn](const StrRef& v) {
    if (v != nullptr && v->on_disk())
      disk = v;  // read below, with no lock held
    else
      fn(v);
  });
  if (!st.ok() || disk == nullptr) return st;
  auto r = LoadTieredSync(key, disk);
  if (!r.ok()) return r.status();
  fn(*r);
  return Status::OK();
}

Result<StrRef> Store::StrGetDel(std::string_view key, uint64_t* lsn, bool tiered_as_is) {
  auto r = StrGetDelRaw(key, lsn);
  if (tiered_as_is || !r.ok() || *r == nullptr || !(*r)->on_disk()) return r;
  return LoadTieredSync(key, *r);
}

Result<StrRef> Store::StrGetEx(std::string_view key, bool persist, int64_t expire_at_ms,
                               uint64_t* lsn, bool tiered_as_is) {
  auto r = StrGetExRaw(key, persist, expire_at_ms, lsn);
  if (tiered_as_is || !r.ok() || *r == nullptr || !(*r)->on_disk()) return r;
  return LoadTieredSync(key, *r);
}

Status Store::StrGetWithRaw(std::string_view key, const std::function<void(const StrRef&)>& fn) {
  {
    // The read path: only the key's shard lock. An expired key is removed
    // (and logged) by the slow path below, under ks_.mu.
    Shard& sh = ks_.ShardFor(key);
    bool missing;
    {
      base::MutexLock sl(&sh.mu);
      auto it = sh.strings.find(key);
      missing = it == sh.strings.end();
      // The clock is read only for a key with a TTL (one read per GET otherwise).
      // A block with a parent takes the path below (its ancestors are stamped under ks_.mu).
      if (!missing && !it->second.HasParent() &&
          (it->second.expire_at_ms == 0 || !Expired(it->second, UnixMillis()))) {
        ++sh.hits;
        ks_.TouchLocked(sh, it->second);
        fn(it->second.value);
        return Status::OK();
      }
    }
    if (missing) {
      if (IsNamespaceKeyShared(key)) return Status::WrongType();
      {
        base::MutexLock sl(&sh.mu);
        ++sh.misses;
      }
      fn(nullptr);
      return Status::OK();
    }
  }
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  StrEntry* e = StrFindLocked(key, UnixMillis(), &unused);
  Shard& sh = ks_.ShardFor(key);
  StrRef v;
  uint64_t stamp = 0;
  {
    base::MutexLock sl(&sh.mu);
    if (e == nullptr) {
      if (IsNamespaceKeyLocked(key)) return Status::WrongType();
      ++sh.misses;
    } else {
      ++sh.hits;
      ks_.TouchLocked(sh, *e);
      v = e->value;
      stamp = e->stamp;
    }
  }
  if (e != nullptr && e->HasParent()) StampAncestorsLocked(*e, stamp);
  fn(v);
  return Status::OK();
}

Result<StrRef> Store::StrGetDelRaw(std::string_view key, uint64_t* lsn) {
  *lsn = 0;
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  StrEntry* e = StrFindLocked(key, UnixMillis(), lsn);
  if (e == nullptr && IsNamespaceKeyLocked(key)) return Status::WrongType();
  CountHitOrMiss(key, e != nullptr);
  if (e == nullptr) return StrRef();
  StrRef v = e->value;
  PION_RETURN_IF_ERROR(StrRemoveLocked(*e, 0, lsn));
  return v;
}

Result<StrRef> Store::StrGetExRaw(std::string_view key, bool persist, int64_t expire_at_ms,
                                  uint64_t* lsn) {
  *lsn = 0;
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  int64_t now = UnixMillis();
  StrEntry* e = StrFindLocked(key, now, lsn);
  if (e == nullptr) {
    if (IsNamespaceKeyLocked(key)) return Status::WrongType();
    CountHitOrMiss(key, false);
    return StrRef();
  }
  StrRef v = e->value;
  {
    Shard& sh = ks_.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    ++sh.hits;
    ks_.TouchLocked(sh, *e);
  }
  if (expire_at_ms > 0 && expire_at_ms <= now) {
    PION_RETURN_IF_ERROR(StrRemoveLocked(*e, 0, lsn));
  } else if (expire_at_ms > 0 || (persist && e->expire_at_ms != 0)) {
    PION_RETURN_IF_ERROR(StrExpireLoggedLocked(key, *e, persist ? 0 : expire_at_ms, lsn));
  }
  return v;
}

Status Store::StrExpireLoggedLocked(std::string_view key, StrEntry& e, int64_t at_ms,
                                    uint64_t* lsn) {
  if (sink_) {
    auto r = sink_->Log(persist::StrExpireRec{key, at_ms});
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  ks_.SetExpireShardLocked(e, at_ms);
  e.version = ks_.NextVersionLocked();
  return Status::OK();
}

std::vector<StrRef> Store::StrMGet(std::span<const std::string_view> keys, bool tiered_as_is) {
  std::vector<StrRef> out(keys.size());
  int64_t now = UnixMillis();
  bool expired = false;
  // Each key under its shard's lock alone; an expired one sends the keys from
  // it on to the slow path (under ks_.mu), which removes it.
  size_t i = 0;
  for (; i < keys.size(); ++i) {
    Shard& sh = ks_.ShardFor(keys[i]);
    base::MutexLock sl(&sh.mu);
    auto it = sh.strings.find(keys[i]);
    if (it == sh.strings.end()) {
      ++sh.misses;
      continue;
    }
    if (Expired(it->second, now) || it->second.HasParent()) {
      expired = true;  // the path under ks_.mu (removal, or ancestors to stamp)
      break;
    }
    ++sh.hits;
    ks_.TouchLocked(sh, it->second);
    out[i] = it->second.value;
  }
  if (!expired) return tiered_as_is ? out : MGetFromTier(keys, std::move(out));
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  for (; i < keys.size(); ++i) {
    StrEntry* e = StrFindLocked(keys[i], now, &unused);
    uint64_t stamp = 0;
    {
      Shard& sh = ks_.ShardFor(keys[i]);
      base::MutexLock sl(&sh.mu);
      if (e == nullptr) {
        ++sh.misses;
        continue;
      }
      ++sh.hits;
      ks_.TouchLocked(sh, *e);
      out[i] = e->value;
      stamp = e->stamp;
    }
    if (e->HasParent()) StampAncestorsLocked(*e, stamp);
  }
  l.Unlock();
  return tiered_as_is ? out : MGetFromTier(keys, std::move(out));
}

std::vector<StrRef> Store::MGetFromTier(std::span<const std::string_view> keys,
                                        std::vector<StrRef> out) {
  if (!tier_) return out;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != nullptr && out[i]->on_disk()) {
      auto r = LoadTieredSync(keys[i], out[i]);
      out[i] = r.ok() ? *r : nullptr;  // an unreadable value reads as missing here
    }
  return out;
}

void Store::CountHitOrMiss(std::string_view key, bool hit) {
  Shard& sh = ks_.ShardFor(key);
  base::MutexLock sl(&sh.mu);
  ++(hit ? sh.hits : sh.misses);
}

Result<bool> Store::StrMSet(std::span<const std::string_view> kv, bool nx, uint64_t* lsn,
                            std::span<const StrRef> made) {
  *lsn = 0;
  std::vector<StrRef> values(kv.size() / 2);
  for (size_t i = 0; i + 1 < kv.size(); i += 2) {
    if (kv[i].size() > kMaxStrKeyBytes)
      return Status(Code::kInvalidArgument, Reason::kKeyTooLong, {}, "key too long");
    if (i / 2 < made.size() && made[i / 2] != nullptr) {
      values[i / 2] = made[i / 2];
      continue;
    }
    auto v = StrValue::Copy(kv[i + 1]);
    if (!v) return Status(Code::kOutOfBudget, Reason::kNoMemory, {}, "out of memory");
    values[i / 2] = std::move(v);
  }
  std::vector<StrPending> pend;
  pend.reserve(values.size());
  Status st;
  {
    base::ReaderLock gate(&gate_);
    base::MutexLock l(&ks_.mu);
    int64_t now = UnixMillis();
    uint64_t need = 0;
    for (size_t i = 0; i + 1 < kv.size(); i += 2) {
      if (IsNamespaceKeyLocked(kv[i])) {
        if (nx) return false;
        return Status::WrongType();
      }
      StrEntry* e = StrFindLocked(kv[i], now, lsn);
      if (nx && e != nullptr) return false;
      need += StrCharge(kv[i], values[i / 2]);
    }
    if (cfg_.max_bytes > 0) {
      if (need > cfg_.max_bytes) return Status::OutOfBudget("");
      // Keys being replaced give their bytes back; evict for the rest.
      uint64_t have = 0;
      for (size_t i = 0; i + 1 < kv.size(); i += 2)
        if (const StrEntry* e = ks_.FindStringLocked(kv[i])) have += StrCharge(kv[i], e->value);
      PION_RETURN_IF_ERROR(EvictLocked(
          nullptr,
          [&]()
              REQUIRES(ks_.mu) { return bytes_ - std::min(have, bytes_) + need <= cfg_.max_bytes; },
          lsn, kv[0], true));
    }
    for (size_t i = 0; i + 1 < kv.size(); i += 2) {
      pend.emplace_back();
      st = StrLogSetLocked(kv[i], values[i / 2], 0, &pend.back());
      if (!st.ok()) {
        pend.pop_back();
        break;
      }
      BeginPending();
    }
  }
  Status fin = StrFinish(pend, lsn);
  PION_RETURN_IF_ERROR(st);
  PION_RETURN_IF_ERROR(fin);
  return true;
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

std::vector<persist::SnapshotString> Store::TakeCapturedStrings() {
  base::MutexLock l(&ks_.mu);
  return std::move(captured_strings_);
}

}  // namespace pion::store
