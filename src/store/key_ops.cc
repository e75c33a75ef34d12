// The keyspace's operations that look keys up (store/key_ops.h): EXISTS,
// DEL/UNLINK, TYPE, RENAME, COPY, TOUCH, the EXPIRE family, OBJECT, MEMORY
// USAGE and WATCH versions, over the keyspace's primitives (store/slice.h).
// A mutation holds the snapshot gate shared and ks.mu while it logs and
// applies; a read takes ks.mu (its lazy expiry may remove a key) or, on
// EXISTS' fast path, one shard lock at a time.
#include "store/key_ops.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "base/clock.h"
#include "store/expiry.h"
#include "store/namespace.h"

namespace pion::store {

uint64_t OpExists(const OpArgs& op, std::span<const std::string_view> keys) {
  const Slice& s = op.slice;
  int64_t now = UnixMillis();
  uint64_t n = 0;
  size_t i = 0;
  // The read path: one shard lock at a time. An expired key sends the keys
  // from it on to the slow path (under ks.mu), which removes it.
  for (; i < keys.size(); ++i) {
    std::string_view k = keys[i];
    {
      const Shard& sh = s.ks.ShardFor(k);
      base::MutexLock sl(&sh.mu);
      auto it = sh.strings.find(k);
      if (it != sh.strings.end()) {
        if (Expired(it->second, now)) break;
        ++n;
        continue;
      }
    }
    if (s.IsNamespaceKeyShared(k)) ++n;
  }
  if (i == keys.size()) return n;
  base::MutexLock l(&s.ks.mu);
  for (; i < keys.size(); ++i)
    if (s.FindLocked(keys[i], now, nullptr) != nullptr || s.IsNamespaceKeyLocked(keys[i])) ++n;
  return n;
}

Result<uint64_t> OpDelete(const OpArgs& op, std::span<const std::string_view> keys,
                          const std::function<bool(std::string_view ns)>& may_drop) {
  const Slice& s = op.slice;
  *op.lsn = 0;
  base::ReaderLock gate(&s.gate());
  base::MutexLock l(&s.ks.mu);
  int64_t now = UnixMillis();
  if (may_drop) {
    // As OpDrop: every namespace a key would remove, descendants
    // included, is asked before anything is removed; one refusal refuses the
    // whole call.
    std::vector<const Namespace*> todo;
    for (std::string_view k : keys) {
      const StrEntry* se = s.ks.FindStringLocked(k);
      if (se != nullptr && !Expired(*se, now)) continue;  // a string key
      if (const NsPtr* n = s.NamespaceOfKeyLocked(k)) todo.push_back(n->get());
    }
    if (Status st = Slice::AskSubtrees(std::move(todo), may_drop); !st.ok()) return st;
  }
  uint64_t n = 0;
  for (std::string_view k : keys) {
    if (StrEntry* e = s.FindLocked(k, now, op.lsn)) {
      PION_RETURN_IF_ERROR(s.RemoveLocked(*e, 0, op.lsn));
      ++n;
      continue;
    }
    const NsPtr* it = s.NamespaceOfKeyLocked(k);
    if (it == nullptr) continue;
    NsPtr victim = *it;
    // With its descendants (store.h "Lineage"), each counted as a key removed.
    PION_RETURN_IF_ERROR(s.DropNamespaceLocked(victim, op.lsn, &n));
  }
  return n;
}

KeyType OpType(const OpArgs& op, std::string_view key) {
  const Slice& s = op.slice;
  base::MutexLock l(&s.ks.mu);
  if (s.FindLocked(key, UnixMillis(), nullptr) != nullptr) return KeyType::kString;
  return s.IsNamespaceKeyLocked(key) ? KeyType::kKvPrefix : KeyType::kNone;
}

Status OpRename(const OpArgs& op, std::string_view src, std::string_view dst, bool nx, bool* done) {
  const Slice& s = op.slice;
  *op.lsn = 0;
  *done = false;
  PION_RETURN_IF_ERROR(CheckKeyLength(dst));
  base::ReaderLock gate(&s.gate());
  base::MutexLock l(&s.ks.mu);
  int64_t now = UnixMillis();
  StrEntry* e = s.FindLocked(src, now, op.lsn);
  if (e == nullptr) {
    if (s.IsNamespaceKeyLocked(src))
      return Status(Code::kNotSupported, Reason::kRenameNamespace, {}, "RENAME of a namespace key");
    return Status(Code::kNotFound, Reason::kNoSuchKey, {}, "no such key");
  }
  bool dst_ns = s.IsNamespaceKeyLocked(dst);
  bool dst_str = s.FindLocked(dst, now, op.lsn) != nullptr;
  if (nx && (dst_ns || dst_str)) return Status::OK();
  *done = true;
  if (src == dst) return Status::OK();
  if (dst_ns) return Status::WrongType();
  PION_RETURN_IF_ERROR(s.LogLocked(persist::StrRenameRec{src, dst}, op.lsn));
  s.MoveLocked(*e, dst);
  return Status::OK();
}

Result<bool> OpCopy(const OpArgs& op, std::string_view src, std::string_view dst, bool replace) {
  const Slice& s = op.slice;
  *op.lsn = 0;
  PION_RETURN_IF_ERROR(CheckKeyLength(dst));
  StrPending pend[1];
  {
    base::ReaderLock gate(&s.gate());
    base::MutexLock l(&s.ks.mu);
    int64_t now = UnixMillis();
    StrEntry* e = s.FindLocked(src, now, op.lsn);
    if (e == nullptr && s.IsNamespaceKeyLocked(src))
      return Status(Code::kNotSupported, Reason::kCopyNamespace, {}, "COPY of a namespace key");
    if (e == nullptr) return false;
    if (s.IsNamespaceKeyLocked(dst)) {
      if (!replace) return false;
      return Status::WrongType();
    }
    StrEntry* d = s.FindLocked(dst, now, op.lsn);
    if (d != nullptr && !replace) return false;
    if (e->value->quantized())
      return Status(Code::kInvalidArgument, Reason::kBlockQuantized, {}, "quantized block");
    StrRef v = e->value;
    int64_t expire = e->expire_at_ms;
    PION_RETURN_IF_ERROR(s.RoomLocked(dst, d, StrCharge(dst, v),
                                      d != nullptr ? StrCharge(dst, d->value) : 0, op.lsn));
    PION_RETURN_IF_ERROR(s.LogSetLocked(dst, v, expire, &pend[0], d));
    s.BeginPending();
  }
  PION_RETURN_IF_ERROR(s.Finish(pend, op.lsn));
  return true;
}

uint64_t OpTouch(const OpArgs& op, std::span<const std::string_view> keys) {
  const Slice& s = op.slice;
  base::MutexLock l(&s.ks.mu);
  int64_t now = UnixMillis();
  uint64_t n = 0;
  for (std::string_view k : keys) {
    if (StrEntry* e = s.FindLocked(k, now, nullptr)) {
      Shard& sh = s.ks.ShardFor(k);
      base::MutexLock sl(&sh.mu);
      ++sh.hits;
      s.ks.TouchLocked(sh, *e);
      ++n;
    } else if (s.IsNamespaceKeyLocked(k)) {
      ++n;
    } else {
      s.CountHitOrMiss(k, false);
    }
  }
  return n;
}

Result<bool> OpExpire(const OpArgs& op, std::string_view key, int64_t at_ms, ExpireCond c) {
  const Slice& s = op.slice;
  *op.lsn = 0;
  base::ReaderLock gate(&s.gate());
  base::MutexLock l(&s.ks.mu);
  int64_t now = UnixMillis();
  StrEntry* e = s.FindLocked(key, now, op.lsn);
  if (e == nullptr) return false;
  int64_t cur = e->expire_at_ms;  // 0 = none = infinite for GT/LT
  switch (c) {
    case ExpireCond::kAlways:
      break;
    case ExpireCond::kNx:
      if (cur != 0) return false;
      break;
    case ExpireCond::kXx:
      if (cur == 0) return false;
      break;
    case ExpireCond::kGt:
      if (cur == 0 || at_ms <= cur) return false;
      break;
    case ExpireCond::kLt:
      if (cur != 0 && at_ms >= cur) return false;
      break;
    case ExpireCond::kLtXx:
      if (cur == 0 || at_ms >= cur) return false;
      break;
  }
  if (at_ms <= now) {
    PION_RETURN_IF_ERROR(s.RemoveLocked(*e, 0, op.lsn));
    return true;
  }
  PION_RETURN_IF_ERROR(s.ExpireLoggedLocked(key, *e, at_ms, op.lsn));
  return true;
}

Result<bool> OpPersist(const OpArgs& op, std::string_view key) {
  const Slice& s = op.slice;
  *op.lsn = 0;
  base::ReaderLock gate(&s.gate());
  base::MutexLock l(&s.ks.mu);
  StrEntry* e = s.FindLocked(key, UnixMillis(), op.lsn);
  if (e == nullptr || e->expire_at_ms == 0) return false;
  PION_RETURN_IF_ERROR(s.ExpireLoggedLocked(key, *e, 0, op.lsn));
  return true;
}

int64_t OpExpireTimeMs(const OpArgs& op, std::string_view key) {
  const Slice& s = op.slice;
  base::MutexLock l(&s.ks.mu);
  StrEntry* e = s.FindLocked(key, UnixMillis(), nullptr);
  if (e == nullptr) return s.IsNamespaceKeyLocked(key) ? -1 : -2;
  return e->expire_at_ms == 0 ? -1 : e->expire_at_ms;
}

void OpSetIdleTime(const OpArgs& op, std::string_view key, uint64_t idle_s) {
  const Slice& s = op.slice;
  base::MutexLock l(&s.ks.mu);
  if (StrEntry* e = s.ks.FindStringLocked(key)) {
    Shard& sh = s.ks.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    int64_t at = UnixSeconds() - static_cast<int64_t>(std::min<uint64_t>(idle_s, UINT32_MAX));
    e->atime_s = static_cast<uint32_t>(std::max<int64_t>(at, 0));
  }
}

KeyObject OpObject(const OpArgs& op, std::string_view key) {
  const Slice& s = op.slice;
  KeyObject out;
  base::MutexLock l(&s.ks.mu);
  if (StrEntry* e = s.FindLocked(key, UnixMillis(), nullptr)) {
    Shard& sh = s.ks.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    out.type = KeyType::kString;
    out.value = e->value;
    int64_t idle = UnixSeconds() - static_cast<int64_t>(e->atime_s);
    out.idle_s = idle > 0 ? static_cast<uint64_t>(idle) : 0;
    out.freq = s.ks.LfuDecayed(*e);
    return out;
  }
  if (s.IsNamespaceKeyLocked(key)) out.type = KeyType::kKvPrefix;
  return out;
}

uint64_t OpKeyMemory(const OpArgs& op, std::string_view key) {
  const Slice& s = op.slice;
  base::MutexLock l(&s.ks.mu);
  if (StrEntry* e = s.FindLocked(key, UnixMillis(), nullptr)) return StrCharge(key, e->value);
  if (const Namespace* n = s.NamespaceLocked(key)) return n->bytes + key.size() + kStrEntryOverhead;
  return 0;
}

uint64_t OpKeyVersion(const OpArgs& op, std::string_view key) {
  const Slice& s = op.slice;
  base::MutexLock l(&s.ks.mu);
  if (const StrEntry* e = s.ks.FindStringLocked(key)) return e->version;
  if (const Namespace* ns = s.NamespaceLocked(key)) return (uint64_t{1} << 63) | ns->incarnation;
  return s.ks.MissingVersionLocked();
}

}  // namespace pion::store
