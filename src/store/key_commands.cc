// The keyspace's commands over both kinds of key (string keys and namespaces):
// EXISTS, DEL/UNLINK, TYPE, RENAME, EXPIRE and PERSIST, SCAN, KEYS, RANDOMKEY,
// DBSIZE, MEMORY USAGE, active expiry, the keyspace counters and WATCH versions.
// See store.h ("String keys") and docs/ARCHITECTURE.md "Store". The keyspace
// these walk (shards, scan and expiry orders, versions) is store/keyspace.h;
// strings.cc has the string values and their logging.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "base/check.h"
#include "base/strutil.h"
#include "store/expiry.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

uint64_t Store::KeysExist(std::span<const std::string_view> keys) {
  int64_t now = UnixMillis();
  uint64_t n = 0;
  size_t i = 0;
  // The read path: one shard lock at a time. An expired key sends the keys
  // from it on to the slow path (under ks_.mu), which removes it.
  for (; i < keys.size(); ++i) {
    std::string_view k = keys[i];
    {
      const Shard& sh = ks_.ShardFor(k);
      base::MutexLock sl(&sh.mu);
      auto it = sh.strings.find(k);
      if (it != sh.strings.end()) {
        if (Expired(it->second, now)) break;
        ++n;
        continue;
      }
    }
    if (IsNamespaceKeyShared(k)) ++n;
  }
  if (i == keys.size()) return n;
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  for (; i < keys.size(); ++i)
    if (StrFindLocked(keys[i], now, &unused) != nullptr || IsNamespaceKeyLocked(keys[i])) ++n;
  return n;
}

Result<uint64_t> Store::KeysDelete(std::span<const std::string_view> keys, uint64_t* lsn,
                                   const std::function<bool(std::string_view ns)>& may_drop) {
  *lsn = 0;
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  int64_t now = UnixMillis();
  if (may_drop) {
    // As Drop: every namespace a key would remove, descendants included, is
    // asked before anything is removed; one refusal refuses the whole call.
    std::vector<const Namespace*> todo;
    for (std::string_view k : keys) {
      const StrEntry* se = ks_.FindStringLocked(k);
      if (se != nullptr && !Expired(*se, now)) continue;  // a string key
      std::string_view ns = k;
      Side side;
      const Namespace* it = NsFindLocked(ns);
      if (it == nullptr && ParseSessionId(k, &ns, &side)) it = NsFindLocked(ns);
      if (it != nullptr) todo.push_back(it);
    }
    if (Status s = AskSubtrees(std::move(todo), may_drop); !s.ok()) return s;
  }
  uint64_t n = 0;
  for (std::string_view k : keys) {
    if (StrEntry* e = StrFindLocked(k, now, lsn)) {
      PION_RETURN_IF_ERROR(StrRemoveLocked(*e, 0, lsn));
      ++n;
      continue;
    }
    std::string_view ns = k;
    Side side;
    const NsPtr* it = NsRefLocked(ns);
    if (it == nullptr && ParseSessionId(k, &ns, &side)) it = NsRefLocked(ns);
    if (it == nullptr) continue;
    NsPtr victim = *it;
    // With its descendants (store.h "Lineage"), each counted as a key removed.
    PION_RETURN_IF_ERROR(RemoveSubtreeLocked(victim, DropReason::kDrop, lsn, &n));
  }
  return n;
}

KeyType Store::TypeOf(std::string_view key) {
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  if (StrFindLocked(key, UnixMillis(), &unused) != nullptr) return KeyType::kString;
  return IsNamespaceKeyLocked(key) ? KeyType::kKvPrefix : KeyType::kNone;
}

Status Store::Rename(std::string_view src, std::string_view dst, bool nx, bool* done,
                     uint64_t* lsn) {
  *lsn = 0;
  *done = false;
  if (dst.size() > kMaxStrKeyBytes)
    return Status(Code::kInvalidArgument, Reason::kKeyTooLong, {}, "key too long");
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  int64_t now = UnixMillis();
  StrEntry* e = StrFindLocked(src, now, lsn);
  if (e == nullptr) {
    if (IsNamespaceKeyLocked(src))
      return Status(Code::kNotSupported, Reason::kRenameNamespace, {}, "RENAME of a namespace key");
    return Status(Code::kNotFound, Reason::kNoSuchKey, {}, "no such key");
  }
  bool dst_ns = IsNamespaceKeyLocked(dst);
  bool dst_str = StrFindLocked(dst, now, lsn) != nullptr;
  if (nx && (dst_ns || dst_str)) return Status::OK();
  *done = true;
  if (src == dst) return Status::OK();
  if (dst_ns) return Status::WrongType();
  if (sink_) {
    auto r = sink_->Log(persist::StrRenameRec{src, dst});
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  StrMoveLocked(*e, dst);
  return Status::OK();
}

Result<bool> Store::Expire(std::string_view key, int64_t at_ms, ExpireCond c, uint64_t* lsn) {
  *lsn = 0;
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  int64_t now = UnixMillis();
  StrEntry* e = StrFindLocked(key, now, lsn);
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
    PION_RETURN_IF_ERROR(StrRemoveLocked(*e, 0, lsn));
    return true;
  }
  PION_RETURN_IF_ERROR(StrExpireLoggedLocked(key, *e, at_ms, lsn));
  return true;
}

int64_t Store::ExpireTimeMs(std::string_view key) {
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  StrEntry* e = StrFindLocked(key, UnixMillis(), &unused);
  if (e == nullptr) return IsNamespaceKeyLocked(key) ? -1 : -2;
  return e->expire_at_ms == 0 ? -1 : e->expire_at_ms;
}

Result<bool> Store::Persist(std::string_view key, uint64_t* lsn) {
  *lsn = 0;
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  StrEntry* e = StrFindLocked(key, UnixMillis(), lsn);
  if (e == nullptr || e->expire_at_ms == 0) return false;
  if (sink_) {
    auto r = sink_->Log(persist::StrExpireRec{key, 0});
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  ks_.SetExpireShardLocked(*e, 0);
  e->version = ks_.NextVersionLocked();
  return true;
}

ScanResult Store::Scan(uint64_t cursor, uint64_t count, std::optional<std::string_view> match,
                       KeyType type) {
  ScanResult out;
  if (count == 0) count = 10;
  base::MutexLock l(&ks_.mu);
  int64_t now = UnixMillis();
  auto it = ks_.scan_order().lower_bound({cursor, nullptr});
  uint64_t taken = 0;
  uint64_t last = 0;
  bool done = true;
  for (; it != ks_.scan_order().end(); ++it) {
    if (taken >= count && it->first != last) {
      done = false;
      break;
    }
    last = it->first;
    ++taken;
    const StrEntry& e = *it->second;
    if (Expired(e, now)) continue;
    if (type != KeyType::kNone && type != KeyType::kString) continue;
    if (match && !GlobMatch(*match, *e.key, false)) continue;
    out.keys.push_back(*e.key);
  }
  // Namespaces whose hash falls in the range this call covered.
  uint64_t end = done ? UINT64_MAX : last;
  if (type == KeyType::kNone || type == KeyType::kKvPrefix) {
    for (const Shard& sh : ks_.shards())
      for (auto& [name, n] : ks_.MapOf(sh)) {
        uint64_t h = StrHash{}(name);
        if (h < cursor || h > end) continue;
        if (match && !GlobMatch(*match, name, false)) continue;
        out.keys.push_back(name);
      }
  }
  out.cursor = (done || end == UINT64_MAX) ? 0 : end + 1;
  return out;
}

std::vector<std::string> Store::Keys(std::string_view pattern) {
  std::vector<std::string> out;
  base::MutexLock l(&ks_.mu);
  int64_t now = UnixMillis();
  for (const Shard& sh : ks_.shards())
    for (auto& [k, e] : ks_.StringsOf(sh))
      if (!Expired(e, now) && GlobMatch(pattern, k, false)) out.push_back(k);
  for (const Shard& sh : ks_.shards())
    for (auto& [name, n] : ks_.MapOf(sh))
      if (GlobMatch(pattern, name, false)) out.push_back(name);
  return out;
}

std::optional<std::string> Store::RandomKey() {
  base::MutexLock l(&ks_.mu);
  const uint64_t nstr = StrCountLocked();
  uint64_t total = nstr + NsCountLocked();
  if (total == 0) return std::nullopt;
  rand_state_ ^= rand_state_ << 13, rand_state_ ^= rand_state_ >> 7,
      rand_state_ ^= rand_state_ << 17;
  uint64_t r = rand_state_ % total;
  if (r >= nstr) {
    r -= nstr;
    for (const Shard& sh : ks_.shards()) {
      if (r >= ks_.MapOf(sh).size()) {
        r -= ks_.MapOf(sh).size();
        continue;
      }
      auto it = ks_.MapOf(sh).begin();
      std::advance(it, static_cast<long>(r));
      return it->first;
    }
    return std::nullopt;
  }
  // A random bucket of the shards' tables (one after the other), then the first key on.
  const size_t nb = ks_.StringBucketsLocked();
  Keyspace::BucketPos p = ks_.StringBucketLocked(static_cast<size_t>(rand_state_ >> 20) % nb);
  for (size_t k = 0; k < nb; ++k, ks_.NextStringBucketLocked(&p)) {
    const StrMap& m = ks_.StringsOf(ks_.shard(p.shard));
    if (m.begin(p.bucket) != m.end(p.bucket)) return m.begin(p.bucket)->first;
  }
  return std::nullopt;
}

uint64_t Store::DbSize() const {
  base::MutexLock l(&ks_.mu);
  return StrCountLocked() + NsCountLocked();
}

uint64_t Store::KeyMemory(std::string_view key) {
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  if (StrEntry* e = StrFindLocked(key, UnixMillis(), &unused)) return StrCharge(key, e->value);
  if (const Namespace* n = NsFindLocked(key)) return n->bytes + key.size() + kStrEntryOverhead;
  return 0;
}

uint64_t Store::ExpireActive(uint64_t max_keys) {
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  int64_t now = UnixMillis();
  uint64_t n = 0, unused = 0;
  ReleaseDueLeasesLocked(now, &unused);
  // Pinned keys stay (they expire when their last pin ends): passed over.
  uint64_t looked = 0;
  for (auto it = ks_.expiry_order().begin(); n < max_keys && looked < 4 * max_keys + 16 &&
                                             it != ks_.expiry_order().end() && it->first <= now;
       ++looked) {
    StrEntry* e = it->second;
    ++it;
    if (e->pins > 0) continue;
    if (!StrRemoveLocked(*e, 2, &unused).ok()) break;
    ++n;
  }
  return n;
}

KeyspaceStats Store::KeyStats() const {
  KeyspaceStats s;
  base::MutexLock l(&ks_.mu);
  s.keys = StrCountLocked() + NsCountLocked();
  s.expires = ks_.expiry_order().size();
  if (!ks_.expiry_order().empty()) {
    int64_t avg = ks_.MeanExpireMsLocked() - UnixMillis();
    s.avg_ttl_ms = avg > 0 ? static_cast<uint64_t>(avg) : 0;
  }
  s.string_bytes = str_bytes_;
  for (const Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    s.hits += sh.hits;
    s.misses += sh.misses;
  }
  s.expired = expired_keys_;
  s.evicted_keys = evicted_strings_ + evictions_ / 2;
  s.changes = ks_.ChangesLocked();
  return s;
}

void Store::ResetKeyStats() {
  base::MutexLock l(&ks_.mu);
  expired_keys_ = 0;
  for (Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    sh.hits = sh.misses = 0;
  }
}

uint64_t Store::KeyVersion(std::string_view key) {
  base::MutexLock l(&ks_.mu);
  if (const StrEntry* e = ks_.FindStringLocked(key)) return e->version;
  if (const Namespace* ns = NsFindLocked(key)) return (uint64_t{1} << 63) | ns->incarnation;
  return ks_.MissingVersionLocked();
}

void Store::SetEvictPolicy(EvictPolicy p) {
  base::MutexLock l(&ks_.mu);
  policy_ = p;
}

EvictPolicy Store::evict_policy() const {
  base::MutexLock l(&ks_.mu);
  return policy_;
}

}  // namespace pion::store
