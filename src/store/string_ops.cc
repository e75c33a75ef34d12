// The string keys' whole-value reads and writes (store/string_ops.h): SET,
// GET, GETDEL, GETEX, MGET, MSET, over the keyspace's primitives
// (store/slice.h).
//
// Reads take only the key's shard lock on their fast path; an expired key, or
// a block key whose ancestors a read must stamp, sends the read to the slow
// path under ks.mu, which removes (and logs) or stamps. Writes reserve their
// STRSET under the snapshot gate (shared) and ks.mu, apply it at once and
// write the value to the log once ks.mu is released (Slice::Finish).
#include "store/string_ops.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "base/clock.h"
#include "store/expiry.h"

namespace pion::store {

namespace {

// A value the disk tier holds read (checked) before it is handed out.
Result<StrRef> Loaded(const Slice& s, std::string_view key, Result<StrRef> r, bool tiered_as_is) {
  if (tiered_as_is || !r.ok() || *r == nullptr || !(*r)->on_disk()) return r;
  return s.LoadTiered(key, *r);
}

// OpGetWith without the tier's check (a value on disk handed out as it is).
Status GetWithRaw(const Slice& s, std::string_view key,
                  const std::function<void(const StrRef&)>& fn) {
  {
    // The read path: only the key's shard lock.
    Shard& sh = s.ks.ShardFor(key);
    bool missing;
    {
      base::MutexLock sl(&sh.mu);
      auto it = sh.strings.find(key);
      missing = it == sh.strings.end();
      // The clock is read only for a key with a TTL (one read per GET otherwise).
      // A block with a parent takes the path below (its ancestors are stamped under ks.mu).
      if (!missing && !it->second.HasParent() &&
          (it->second.expire_at_ms == 0 || !Expired(it->second, UnixMillis()))) {
        ++sh.hits;
        s.ks.TouchLocked(sh, it->second);
        fn(it->second.value);
        return Status::OK();
      }
    }
    if (missing) {
      if (s.IsNamespaceKeyShared(key)) return Status::WrongType();
      {
        base::MutexLock sl(&sh.mu);
        ++sh.misses;
      }
      fn(nullptr);
      return Status::OK();
    }
  }
  base::MutexLock l(&s.ks.mu);
  StrEntry* e = s.FindLocked(key, UnixMillis(), nullptr);
  Shard& sh = s.ks.ShardFor(key);
  StrRef v;
  uint64_t stamp = 0;
  {
    base::MutexLock sl(&sh.mu);
    if (e == nullptr) {
      if (s.IsNamespaceKeyLocked(key)) return Status::WrongType();
      ++sh.misses;
    } else {
      ++sh.hits;
      s.ks.TouchLocked(sh, *e);
      v = e->value;
      stamp = e->stamp;
    }
  }
  if (e != nullptr && e->HasParent()) s.StampAncestorsLocked(*e, stamp);
  fn(v);
  return Status::OK();
}

// MGET's values on disk, each read as Slice::LoadTiered reads; one that cannot
// be read reads as missing.
std::vector<StrRef> MGetFromTier(const Slice& s, std::span<const std::string_view> keys,
                                 std::vector<StrRef> out) {
  if (!s.has_tier()) return out;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != nullptr && out[i]->on_disk()) {
      auto r = s.LoadTiered(keys[i], out[i]);
      out[i] = r.ok() ? *r : nullptr;
    }
  return out;
}

}  // namespace

Result<SetOutcome> OpSet(const OpArgs& op, std::string_view key, StrRef value,
                         const SetOptions& o) {
  const Slice& s = op.slice;
  *op.lsn = 0;
  PION_RETURN_IF_ERROR(CheckKeyLength(key));
  SetOutcome out;
  StrPending pend[1];  // on the stack: no allocation per SET
  {
    base::ReaderLock gate(&s.gate());
    base::MutexLock l(&s.ks.mu);
    if (s.IsNamespaceKeyLocked(key)) return Status::WrongType();
    StrEntry* e = s.FindLocked(key, UnixMillis(), op.lsn);
    if (o.want_old && e != nullptr) out.old = e->value;
    if ((o.cond == SetOptions::Cond::kNx && e != nullptr) ||
        (o.cond == SetOptions::Cond::kXx && e == nullptr))
      return out;
    int64_t expire = o.expire_at_ms;
    if (o.keep_ttl && e != nullptr) expire = e->expire_at_ms;
    // As Redis: a write while used memory is over maxmemory (a budget just
    // lowered under noeviction) is refused even when it would not grow it.
    PION_RETURN_IF_ERROR(s.RoomLocked(key, e, StrCharge(key, value),
                                      e != nullptr ? StrCharge(key, e->value) : 0, op.lsn,
                                      /*when_over=*/true));
    PION_RETURN_IF_ERROR(s.LogSetLocked(key, value, expire, &pend[0], e));
    s.BeginPending();
    out.done = true;
  }
  PION_RETURN_IF_ERROR(s.Finish(pend, op.lsn));
  return out;
}

Result<StrRef> OpGet(const OpArgs& op, std::string_view key) {
  StrRef out;
  PION_RETURN_IF_ERROR(OpGetWith(op, key, [&out](const StrRef& v) { out = v; }));
  return out;
}

Status OpGetWith(const OpArgs& op, std::string_view key,
                 const std::function<void(const StrRef&)>& fn, bool tiered_as_is) {
  const Slice& s = op.slice;
  if (!s.has_tier() || tiered_as_is) return GetWithRaw(s, key, fn);
  StrRef disk;
  Status st = GetWithRaw(s, key, [&disk, &fn](const StrRef& v) {
    if (v != nullptr && v->on_disk())
      disk = v;  // read below, with no lock held
    else
      fn(v);
  });
  if (!st.ok() || disk == nullptr) return st;
  auto r = s.LoadTiered(key, disk);
  if (!r.ok()) return r.status();
  fn(*r);
  return Status::OK();
}

Result<StrRef> OpGetDel(const OpArgs& op, std::string_view key, bool tiered_as_is) {
  const Slice& s = op.slice;
  *op.lsn = 0;
  StrRef v;
  {
    base::ReaderLock gate(&s.gate());
    base::MutexLock l(&s.ks.mu);
    StrEntry* e = s.FindLocked(key, UnixMillis(), op.lsn);
    if (e == nullptr && s.IsNamespaceKeyLocked(key)) return Status::WrongType();
    s.CountHitOrMiss(key, e != nullptr);
    if (e == nullptr) return StrRef();
    v = e->value;
    PION_RETURN_IF_ERROR(s.RemoveLocked(*e, 0, op.lsn));
  }
  return Loaded(s, key, std::move(v), tiered_as_is);
}

Result<StrRef> OpGetEx(const OpArgs& op, std::string_view key, bool persist, int64_t expire_at_ms,
                       bool tiered_as_is) {
  const Slice& s = op.slice;
  *op.lsn = 0;
  StrRef v;
  {
    base::ReaderLock gate(&s.gate());
    base::MutexLock l(&s.ks.mu);
    int64_t now = UnixMillis();
    StrEntry* e = s.FindLocked(key, now, op.lsn);
    if (e == nullptr) {
      if (s.IsNamespaceKeyLocked(key)) return Status::WrongType();
      s.CountHitOrMiss(key, false);
      return StrRef();
    }
    v = e->value;
    {
      Shard& sh = s.ks.ShardFor(key);
      base::MutexLock sl(&sh.mu);
      ++sh.hits;
      s.ks.TouchLocked(sh, *e);
    }
    if (expire_at_ms > 0 && expire_at_ms <= now) {
      PION_RETURN_IF_ERROR(s.RemoveLocked(*e, 0, op.lsn));
    } else if (expire_at_ms > 0 || (persist && e->expire_at_ms != 0)) {
      PION_RETURN_IF_ERROR(s.ExpireLoggedLocked(key, *e, persist ? 0 : expire_at_ms, op.lsn));
    }
  }
  return Loaded(s, key, std::move(v), tiered_as_is);
}

std::vector<StrRef> OpMGet(const OpArgs& op, std::span<const std::string_view> keys,
                           bool tiered_as_is) {
  const Slice& s = op.slice;
  std::vector<StrRef> out(keys.size());
  int64_t now = UnixMillis();
  bool expired = false;
  // Each key under its shard's lock alone; an expired one sends the keys from
  // it on to the slow path (under ks.mu), which removes it.
  size_t i = 0;
  for (; i < keys.size(); ++i) {
    Shard& sh = s.ks.ShardFor(keys[i]);
    base::MutexLock sl(&sh.mu);
    auto it = sh.strings.find(keys[i]);
    if (it == sh.strings.end()) {
      ++sh.misses;
      continue;
    }
    if (Expired(it->second, now) || it->second.HasParent()) {
      expired = true;  // the path under ks.mu (removal, or ancestors to stamp)
      break;
    }
    ++sh.hits;
    s.ks.TouchLocked(sh, it->second);
    out[i] = it->second.value;
  }
  if (!expired) return tiered_as_is ? out : MGetFromTier(s, keys, std::move(out));
  base::MutexLock l(&s.ks.mu);
  for (; i < keys.size(); ++i) {
    StrEntry* e = s.FindLocked(keys[i], now, nullptr);
    uint64_t stamp = 0;
    {
      Shard& sh = s.ks.ShardFor(keys[i]);
      base::MutexLock sl(&sh.mu);
      if (e == nullptr) {
        ++sh.misses;
        continue;
      }
      ++sh.hits;
      s.ks.TouchLocked(sh, *e);
      out[i] = e->value;
      stamp = e->stamp;
    }
    if (e->HasParent()) s.StampAncestorsLocked(*e, stamp);
  }
  l.Unlock();
  return tiered_as_is ? out : MGetFromTier(s, keys, std::move(out));
}

Result<bool> OpMSet(const OpArgs& op, std::span<const std::string_view> kv, bool nx,
                    std::span<const StrRef> made) {
  const Slice& s = op.slice;
  *op.lsn = 0;
  std::vector<StrRef> values(kv.size() / 2);
  for (size_t i = 0; i + 1 < kv.size(); i += 2) {
    PION_RETURN_IF_ERROR(CheckKeyLength(kv[i]));
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
    base::ReaderLock gate(&s.gate());
    base::MutexLock l(&s.ks.mu);
    int64_t now = UnixMillis();
    // Keys being replaced give their bytes back (`have`); eviction makes room
    // for the rest, keeping kv[0] (`first`).
    uint64_t need = 0, have = 0;
    StrEntry* first = nullptr;
    for (size_t i = 0; i + 1 < kv.size(); i += 2) {
      if (s.IsNamespaceKeyLocked(kv[i])) {
        if (nx) return false;
        return Status::WrongType();
      }
      StrEntry* e = s.FindLocked(kv[i], now, op.lsn);
      if (nx && e != nullptr) return false;
      if (i == 0) first = e;
      if (e != nullptr) have += StrCharge(kv[i], e->value);
      need += StrCharge(kv[i], values[i / 2]);
    }
    PION_RETURN_IF_ERROR(s.RoomLocked(kv[0], first, need, have, op.lsn, /*when_over=*/true));
    for (size_t i = 0; i + 1 < kv.size(); i += 2) {
      pend.emplace_back();
      st = s.LogSetLocked(kv[i], values[i / 2], 0, &pend.back());
      if (!st.ok()) {
        pend.pop_back();
        break;
      }
      s.BeginPending();
    }
  }
  Status fin = s.Finish(pend, op.lsn);
  PION_RETURN_IF_ERROR(st);
  PION_RETURN_IF_ERROR(fin);
  return true;
}

}  // namespace pion::store
