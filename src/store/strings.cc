// String keys: the map, the LRU list shared (by stamp) with the namespaces,
// expiry (lazy and active), SCAN in hash order, and their logging. See store.h
// ("String keys") and docs/ARCHITECTURE.md "Store".
//
// Logging: small records (DEL, EXPIRE, RENAME) are written under mu_ like a
// namespace drop. A STRSET is reserved under mu_ (fixing its LSN, so records
// of one key replay in the order they were applied), applied at once, and its
// value written to the log after mu_ is released, inside a pending change (the
// snapshot barrier waits for it). If that write fails the change is rolled
// back (the previous value restored) unless a later write replaced it; the
// client gets the error. Between apply and rollback another client may have
// read the value (the only state the log may briefly not hold).

// XXH3 inline (the header's own mode): KeyHash is every string lookup's hash,
// and KV.BLOCK.MATCH's per key.
#define XXH_INLINE_ALL
#include <xxhash.h>

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

namespace {

// OBJECT IDLETIME's clock: the kernel's coarse clock (no hardware read per touch).
uint32_t CoarseUnixSeconds() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<uint32_t>(ts.tv_sec);
}

uint64_t KeyHash(std::string_view k) { return XXH3_64bits(k.data(), k.size()); }

}  // namespace

size_t StrHash::operator()(std::string_view s) const { return KeyHash(s); }

uint64_t Store::LookupHash(std::string_view key) { return KeyHash(key); }

size_t Store::ShardIndex(std::string_view key) {
  return ShardOfHash(KeyHash(MayHaveHashTag(key) ? HashedPart(key) : key));
}

size_t Store::ShardIndex(std::string_view key, uint64_t lookup_hash) {
  return MayHaveHashTag(key) ? ShardOfHash(KeyHash(HashedPart(key))) : ShardOfHash(lookup_hash);
}

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

// ---- internals (REQUIRE mu_) ----

bool Store::IsNamespaceKeyLocked(std::string_view key) const {
  if (NsFindLocked(key) != nullptr) return true;
  std::string_view ns;
  Side side;
  return ParseSessionId(key, &ns, &side) && NsFindLocked(ns) != nullptr;
}

StrEntry* Store::StrEntryLocked(std::string_view key) const {
  const Shard& sh = ShardFor(key);
  auto it = StringsOf(sh).find(key);
  return it == StringsOf(sh).end() ? nullptr : const_cast<StrEntry*>(&it->second);
}

// An entry is in its shard's RAM list or, when its value lives in the disk
// tier, in the tier's list.
namespace {

uint16_t LfuMinuteNow() { return static_cast<uint16_t>((CoarseUnixSeconds() / 60) & 0xffff); }

// A cheap per-thread random fraction in [0, 1) for the counter's increments.
double LfuRandom() {
  thread_local uint64_t x = 0x2545f4914f6cdd1dull ^ reinterpret_cast<uintptr_t>(&x);
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return static_cast<double>(x >> 11) / 9007199254740992.0;
}

}  // namespace

uint8_t Store::LfuDecayedLocked(const StrEntry& e) const {
  const uint32_t decay = lfu_decay_time_.load(std::memory_order_relaxed);
  if (decay == 0) return e.lfu_counter;
  const uint16_t now = LfuMinuteNow();
  const uint32_t elapsed = now >= e.lfu_minute ? now - e.lfu_minute : 65535u - e.lfu_minute + now;
  const uint32_t periods = elapsed / decay;
  return periods >= e.lfu_counter ? 0 : static_cast<uint8_t>(e.lfu_counter - periods);
}

void Store::LfuTouchLocked(StrEntry& e) {
  // As Redis: decay by the minutes elapsed, then one more with probability
  // 1 / ((counter - 5) * lfu-log-factor + 1); saturates at 255.
  uint8_t c = LfuDecayedLocked(e);
  if (c < 255) {
    const double base = c > kLfuInitCounter ? c - kLfuInitCounter : 0;
    const double p = 1.0 / (base * lfu_log_factor_.load(std::memory_order_relaxed) + 1);
    if (LfuRandom() < p) ++c;
  }
  e.lfu_counter = c;
  e.lfu_minute = LfuMinuteNow();
}

void Store::SetLfuParams(uint32_t log_factor, uint32_t decay_time) {
  lfu_log_factor_.store(log_factor, std::memory_order_relaxed);
  lfu_decay_time_.store(decay_time, std::memory_order_relaxed);
}

void Store::StrTouchLocked(Shard& sh, StrEntry& e) {
  e.stamp = NextStamp();
  e.atime_s = CoarseUnixSeconds();
  LfuTouchLocked(e);
  sh.MoveToTail(e);
}

void Store::StrSetExpireShardLocked(StrEntry& e, int64_t at_ms) {
  Shard& sh = ShardFor(*e.key);
  base::MutexLock sl(&sh.mu);
  StrSetExpireLocked(e, at_ms);
}

void Store::StrSetExpireLocked(StrEntry& e, int64_t at_ms) {
  if (e.expire_at_ms != 0) {
    expiry_order_.erase({e.expire_at_ms, &e});
    expire_sum_ms_ -= e.expire_at_ms;
  }
  e.expire_at_ms = at_ms;
  if (at_ms != 0) {
    expiry_order_.insert({at_ms, &e});
    expire_sum_ms_ += at_ms;
  }
}

void Store::StrEraseLocked(StrEntry& e) {
  if (e.pins > 0 || e.block) ForgetBlockStateLocked(e);
  Shard& sh = ShardFor(*e.key);
  base::MutexLock sl(&sh.mu);
  auto it = sh.strings.find(*e.key);
  PION_DCHECK(it != sh.strings.end() && &it->second == &e);
  StrSetExpireLocked(e, 0);
  sh.Unlink(e);
  if (e.tiered) --tier_entries_;
  scan_order_.erase({e.hash, &e});
  uint64_t charge = StrCharge(it->first, e.value);
  bytes_ -= charge;
  str_bytes_ -= charge;
  ++str_removals_;
  sh.index.Erase(e.hash, &e);
  sh.strings.erase(it);
}

void Store::ClearStringsLocked() {
  for (Shard& sh : shards_) {
    base::MutexLock sl(&sh.mu);
    str_removals_ += sh.strings.size();
    sh.strings.clear();
    sh.index.Clear();
    sh.lru_head = sh.lru_tail = nullptr;
    sh.tier_head = sh.tier_tail = nullptr;
  }
  scan_order_.clear();
  expiry_order_.clear();
  expire_sum_ms_ = 0;
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
  return StrPutLocked(key, std::move(v), expire_at_ms, StrEntryLocked(key));
}

StrEntry& Store::StrPutLocked(std::string_view key, StrRef v, int64_t expire_at_ms,
                              StrEntry* found) {
  Shard& sh = ShardFor(key);
  base::MutexLock sl(&sh.mu);
  const bool fresh = found == nullptr;
  if (found == nullptr) {
    auto it = sh.strings.emplace(std::string(key), StrEntry{}).first;
    found = &it->second;
    found->key = &it->first;
    found->hash = KeyHash(key);
    sh.index.Insert(found->hash, found);
    found->born = leases_.NextBorn();
    scan_order_.insert({found->hash, found});
    sh.Link(*found);
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
  e.version = ++str_version_;
  StrSetExpireLocked(e, expire_at_ms);
  StrTouchLocked(sh, e);
  if (fresh) {  // a new key starts at Redis's initial LFU counter
    e.lfu_counter = kLfuInitCounter;
    e.lfu_minute = LfuMinuteNow();
  }
  return e;
}

StrEntry* Store::StrFindLocked(std::string_view key, int64_t now_ms, uint64_t* lsn) {
  StrEntry* e = StrEntryLocked(key);
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
  StrEntry* old = StrEntryLocked(key);
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
    base::MutexLock l(&mu_);
    StrEntry* e = StrEntryLocked(p.key);
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
    base::MutexLock l(&mu_);
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
          nullptr, [&]() REQUIRES(mu_) { return bytes_ - have + need <= cfg_.max_bytes; }, lsn, key,
          true));
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
    // (and logged) by the slow path below, under mu_.
    Shard& sh = ShardFor(key);
    bool missing;
    {
      base::MutexLock sl(&sh.mu);
      auto it = sh.strings.find(key);
      missing = it == sh.strings.end();
      // The clock is read only for a key with a TTL (one read per GET otherwise).
      // A block with a parent takes the path below (its ancestors are stamped under mu_).
      if (!missing && !it->second.HasParent() &&
          (it->second.expire_at_ms == 0 || !Expired(it->second, UnixMillis()))) {
        ++sh.hits;
        StrTouchLocked(sh, it->second);
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
  base::MutexLock l(&mu_);
  uint64_t unused = 0;
  StrEntry* e = StrFindLocked(key, UnixMillis(), &unused);
  Shard& sh = ShardFor(key);
  StrRef v;
  uint64_t stamp = 0;
  {
    base::MutexLock sl(&sh.mu);
    if (e == nullptr) {
      if (IsNamespaceKeyLocked(key)) return Status::WrongType();
      ++sh.misses;
    } else {
      ++sh.hits;
      StrTouchLocked(sh, *e);
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
  base::MutexLock l(&mu_);
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
  base::MutexLock l(&mu_);
  int64_t now = UnixMillis();
  StrEntry* e = StrFindLocked(key, now, lsn);
  if (e == nullptr) {
    if (IsNamespaceKeyLocked(key)) return Status::WrongType();
    CountHitOrMiss(key, false);
    return StrRef();
  }
  StrRef v = e->value;
  {
    Shard& sh = ShardFor(key);
    base::MutexLock sl(&sh.mu);
    ++sh.hits;
    StrTouchLocked(sh, *e);
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
  StrSetExpireShardLocked(e, at_ms);
  e.version = ++str_version_;
  return Status::OK();
}

std::vector<StrRef> Store::StrMGet(std::span<const std::string_view> keys, bool tiered_as_is) {
  std::vector<StrRef> out(keys.size());
  int64_t now = UnixMillis();
  bool expired = false;
  // Each key under its shard's lock alone; an expired one sends the keys from
  // it on to the slow path (under mu_), which removes it.
  size_t i = 0;
  for (; i < keys.size(); ++i) {
    Shard& sh = ShardFor(keys[i]);
    base::MutexLock sl(&sh.mu);
    auto it = sh.strings.find(keys[i]);
    if (it == sh.strings.end()) {
      ++sh.misses;
      continue;
    }
    if (Expired(it->second, now) || it->second.HasParent()) {
      expired = true;  // the path under mu_ (removal, or ancestors to stamp)
      break;
    }
    ++sh.hits;
    StrTouchLocked(sh, it->second);
    out[i] = it->second.value;
  }
  if (!expired) return tiered_as_is ? out : MGetFromTier(keys, std::move(out));
  base::MutexLock l(&mu_);
  uint64_t unused = 0;
  for (; i < keys.size(); ++i) {
    StrEntry* e = StrFindLocked(keys[i], now, &unused);
    uint64_t stamp = 0;
    {
      Shard& sh = ShardFor(keys[i]);
      base::MutexLock sl(&sh.mu);
      if (e == nullptr) {
        ++sh.misses;
        continue;
      }
      ++sh.hits;
      StrTouchLocked(sh, *e);
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
  Shard& sh = ShardFor(key);
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
    base::MutexLock l(&mu_);
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
        if (const StrEntry* e = StrEntryLocked(kv[i])) have += StrCharge(kv[i], e->value);
      PION_RETURN_IF_ERROR(EvictLocked(
          nullptr,
          [&]() REQUIRES(mu_) { return bytes_ - std::min(have, bytes_) + need <= cfg_.max_bytes; },
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
  base::MutexLock l(&mu_);
  if (expire_at_ms != 0 && expire_at_ms <= UnixMillis()) {
    if (StrEntry* e = StrEntryLocked(key)) StrEraseLocked(*e);
    return;
  }
  auto v =
      StrValue::Copy(std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
  PION_CHECK(v != nullptr);
  if (IsNamespaceKeyLocked(key)) return;  // cannot happen in a log the server wrote
  uint64_t need = StrCharge(key, v);
  if (cfg_.max_bytes > 0) {
    uint64_t unused = 0;
    const StrEntry* old = StrEntryLocked(key);
    uint64_t have = old != nullptr ? StrCharge(key, old->value) : 0;
    (void)EvictLocked(
        nullptr, [&]() REQUIRES(mu_) { return bytes_ - have + need <= cfg_.max_bytes; }, &unused,
        key, true);
  }
  StrEntry& e = StrPutLocked(key, std::move(v), expire_at_ms);
  if (lru_stamp != 0) {
    {
      Shard& sh = ShardFor(key);
      base::MutexLock sl(&sh.mu);
      e.stamp = lru_stamp;
    }
    RaiseClockAbove(lru_stamp);
  }
}

void Store::ApplyStrDel(std::string_view key) {
  base::MutexLock l(&mu_);
  if (StrEntry* e = StrEntryLocked(key)) StrEraseLocked(*e);
}

void Store::ApplyStrExpire(std::string_view key, int64_t expire_at_ms) {
  base::MutexLock l(&mu_);
  StrEntry* e = StrEntryLocked(key);
  if (e == nullptr) return;
  if (expire_at_ms != 0 && expire_at_ms <= UnixMillis()) {
    StrEraseLocked(*e);
    return;
  }
  StrSetExpireShardLocked(*e, expire_at_ms);
}

void Store::ApplyStrRename(std::string_view src, std::string_view dst) {
  base::MutexLock l(&mu_);
  StrEntry* e = StrEntryLocked(src);
  if (e == nullptr || src == dst) return;
  StrMoveLocked(*e, dst);
}

void Store::StrMoveLocked(StrEntry& e, std::string_view dst) {
  StrRef v = e.value;
  int64_t expire = e.expire_at_ms;
  // A block's links move with it (the destination's own go with it first).
  if (StrEntry* old = StrEntryLocked(dst)) StrEraseLocked(*old);
  std::unique_ptr<BlockLinks> links = TakeLinksLocked(e);
  StrEraseLocked(e);
  GiveLinksLocked(StrPutLocked(dst, std::move(v), expire), std::move(links), &e);
}

std::vector<persist::SnapshotString> Store::TakeCapturedStrings() {
  base::MutexLock l(&mu_);
  return std::move(captured_strings_);
}

}  // namespace pion::store
