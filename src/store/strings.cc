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
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "base/check.h"
#include "base/clock.h"
#include "base/strutil.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

namespace {

int64_t NowMs() { return static_cast<int64_t>(UnixMicros() / 1000); }

std::atomic<uint64_t> g_adopted{0};  // StrValue::adopted_total()

uint64_t KeyHash(std::string_view k) { return XXH3_64bits(k.data(), k.size()); }

bool Expired(const StrEntry& e, int64_t now) {
  return e.expire_at_ms != 0 && e.expire_at_ms <= now;
}

}  // namespace

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
  }
  return "allkeys-lru";
}

bool ParseEvictPolicy(std::string_view s, EvictPolicy* out) {
  for (EvictPolicy p : {EvictPolicy::kAllKeysLru, EvictPolicy::kNoEviction,
                        EvictPolicy::kVolatileLru, EvictPolicy::kAllKeysRandom}) {
    if (EqualsIgnoreCase(s, EvictPolicyName(p))) {
      *out = p;
      return true;
    }
  }
  return false;
}

std::shared_ptr<StrValue> StrValue::TryMake(size_t n) {
  size_t cap = (n + 63) & ~size_t{63};
  if (cap < n) return nullptr;  // overflow
  if (cap == 0) cap = 64;
  void* p = nullptr;
  if (cap >= BufferRecycler::kMinBytes) {
    auto [data, got] = BufferRecycler::Global().Take(cap);
    p = data;
    if (p != nullptr) cap = got;
  }
  if (p == nullptr) p = std::aligned_alloc(64, cap);
  if (p == nullptr) return nullptr;
  return Wrap(OwnedBuffer(p, cap, &BufferRecycler::ReleaseToGlobal), n);
}

std::shared_ptr<StrValue> StrValue::Adopt(OwnedBuffer buf, size_t n) {
  g_adopted.fetch_add(1, std::memory_order_relaxed);
  return Wrap(std::move(buf), n);
}

uint64_t StrValue::adopted_total() { return g_adopted.load(std::memory_order_relaxed); }

std::shared_ptr<StrValue> StrValue::Wrap(OwnedBuffer buf, size_t n) {
  PION_DCHECK(n <= buf.capacity());
  auto v = std::make_shared<StrValue>();
  v->data = static_cast<uint8_t*>(buf.data());
  v->size = n;
  v->capacity = buf.capacity();
  v->mem = std::move(buf);
  return v;
}

std::shared_ptr<StrValue> StrValue::Copy(std::string_view s) {
  auto v = TryMake(s.size());
  if (v && !s.empty()) std::memcpy(v->data, s.data(), s.size());
  return v;
}

// ---- internals (REQUIRE mu_) ----

bool Store::IsNamespaceKeyLocked(std::string_view key) const {
  if (map_.find(key) != map_.end()) return true;
  std::string_view ns;
  Side side;
  return ParseSessionId(key, &ns, &side) && map_.find(ns) != map_.end();
}

void Store::StrLinkLocked(StrEntry& e) {
  e.prev = lru_tail_;
  e.next = nullptr;
  if (lru_tail_ != nullptr)
    lru_tail_->next = &e;
  else
    lru_head_ = &e;
  lru_tail_ = &e;
}

void Store::StrUnlinkLocked(StrEntry& e) {
  if (e.prev != nullptr)
    e.prev->next = e.next;
  else
    lru_head_ = e.next;
  if (e.next != nullptr)
    e.next->prev = e.prev;
  else
    lru_tail_ = e.prev;
  e.prev = e.next = nullptr;
}

void Store::StrTouchLocked(StrEntry& e) {
  e.stamp = lru_clock_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (lru_tail_ != &e) {
    StrUnlinkLocked(e);
    StrLinkLocked(e);
  }
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

void Store::StrEraseLocked(StrMap::iterator it) {
  StrEntry& e = it->second;
  StrSetExpireLocked(e, 0);
  StrUnlinkLocked(e);
  scan_order_.erase({e.hash, &e});
  uint64_t charge = StrCharge(it->first, e.value);
  bytes_ -= charge;
  str_bytes_ -= charge;
  ++str_removals_;
  strings_.erase(it);
}

void Store::ClearStringsLocked() {
  str_removals_ += strings_.size();
  strings_.clear();
  lru_head_ = lru_tail_ = nullptr;
  scan_order_.clear();
  expiry_order_.clear();
  expire_sum_ms_ = 0;
  str_bytes_ = 0;
}

Status Store::StrRemoveLocked(StrMap::iterator it, uint8_t reason, uint64_t* lsn) {
  if (sink_) {
    auto r = sink_->OnStrDel(it->first, reason);
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  if (reason == 2) ++expired_keys_;
  StrEraseLocked(it);
  return Status::OK();
}

StrEntry& Store::StrPutLocked(std::string_view key, StrRef v, int64_t expire_at_ms) {
  auto it = strings_.find(key);
  if (it == strings_.end()) {
    it = strings_.emplace(std::string(key), StrEntry{}).first;
    StrEntry& e = it->second;
    e.key = &it->first;
    e.hash = KeyHash(key);
    scan_order_.insert({e.hash, &e});
    StrLinkLocked(e);
  } else {
    uint64_t old = StrCharge(key, it->second.value);
    bytes_ -= old;
    str_bytes_ -= old;
  }
  StrEntry& e = it->second;
  e.value = std::move(v);
  uint64_t charge = StrCharge(key, e.value);
  bytes_ += charge;
  str_bytes_ += charge;
  e.version = ++str_version_;
  StrSetExpireLocked(e, expire_at_ms);
  StrTouchLocked(e);
  return e;
}

StrEntry* Store::StrFindLocked(std::string_view key, int64_t now_ms, uint64_t* lsn) {
  auto it = strings_.find(key);
  if (it == strings_.end()) return nullptr;
  if (Expired(it->second, now_ms)) {
    uint64_t unused = 0;
    // A failed log write keeps the key (still expired: reads skip it next time too).
    if (!StrRemoveLocked(it, 2, lsn != nullptr ? lsn : &unused).ok()) return nullptr;
    return nullptr;
  }
  return &it->second;
}

Status Store::StrLogSetLocked(std::string_view key, const StrRef& v, int64_t expire_at_ms,
                              StrPending* pend) {
  if (sink_) PION_RETURN_IF_ERROR(sink_->ReserveStrSet(key, expire_at_ms, v->size, &pend->rec));
  auto it = strings_.find(key);
  pend->key.assign(key);
  pend->value = v;
  if (it != strings_.end()) {
    pend->had_previous = true;
    pend->previous = it->second.value;
    pend->previous_expire = it->second.expire_at_ms;
  }
  StrPutLocked(key, v, expire_at_ms);
  return Status::OK();
}

Status Store::StrFinish(std::vector<StrPending>& pend, uint64_t* lsn) {
  Status first;
  for (StrPending& p : pend) {
    if (!p.rec.write) continue;
    auto r = p.rec.write(std::span<const uint8_t>(p.value->data, p.value->size));
    if (r.ok()) {
      *lsn = std::max(*lsn, *r);
      continue;
    }
    if (first.ok()) first = r.status();
    std::lock_guard<std::mutex> l(mu_);
    auto it = strings_.find(p.key);
    if (it == strings_.end() || it->second.value != p.value) continue;  // replaced since
    if (p.had_previous)
      StrPutLocked(p.key, p.previous, p.previous_expire);
    else
      StrEraseLocked(it);
  }
  for (size_t i = 0; i < pend.size(); ++i) EndPending();
  return first;
}

// ---- commands ----

Result<SetOutcome> Store::StrSet(std::string_view key, StrRef value, const SetOptions& o,
                                 uint64_t* lsn) {
  *lsn = 0;
  if (key.size() > kMaxStrKeyBytes) return Status::InvalidArgument("key too long");
  SetOutcome out;
  std::vector<StrPending> pend(1);
  {
    std::shared_lock<std::shared_mutex> gate(gate_);
    std::lock_guard<std::mutex> l(mu_);
    if (IsNamespaceKeyLocked(key)) return Status::WrongType();
    int64_t now = NowMs();
    StrEntry* e = StrFindLocked(key, now, lsn);
    if (o.want_old && e != nullptr) out.old = e->value;
    if ((o.cond == SetOptions::Cond::kNx && e != nullptr) ||
        (o.cond == SetOptions::Cond::kXx && e == nullptr))
      return out;
    int64_t expire = o.expire_at_ms;
    if (o.keep_ttl && e != nullptr) expire = e->expire_at_ms;
    uint64_t need = StrCharge(key, value);
    uint64_t have = e != nullptr ? StrCharge(key, e->value) : 0;
    if (cfg_.max_bytes > 0 && need > have) {
      if (need > cfg_.max_bytes) return Status::OutOfBudget("");
      PION_RETURN_IF_ERROR(EvictLocked(
          nullptr, [&] { return bytes_ - have + need <= cfg_.max_bytes; }, lsn, key, true));
    }
    PION_RETURN_IF_ERROR(StrLogSetLocked(key, value, expire, &pend[0]));
    BeginPending();
    out.done = true;
  }
  PION_RETURN_IF_ERROR(StrFinish(pend, lsn));
  return out;
}

Result<StrRef> Store::StrGet(std::string_view key) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t unused = 0;
  StrEntry* e = StrFindLocked(key, NowMs(), &unused);
  if (e == nullptr) {
    if (IsNamespaceKeyLocked(key)) return Status::WrongType();
    ++key_misses_;
    return StrRef();
  }
  ++key_hits_;
  StrTouchLocked(*e);
  return e->value;
}

Result<StrRef> Store::StrGetDel(std::string_view key, uint64_t* lsn) {
  *lsn = 0;
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  StrEntry* e = StrFindLocked(key, NowMs(), lsn);
  if (e == nullptr) {
    if (IsNamespaceKeyLocked(key)) return Status::WrongType();
    ++key_misses_;
    return StrRef();
  }
  ++key_hits_;
  StrRef v = e->value;
  PION_RETURN_IF_ERROR(StrRemoveLocked(strings_.find(key), 0, lsn));
  return v;
}

Result<StrRef> Store::StrGetEx(std::string_view key, bool persist, int64_t expire_at_ms,
                               uint64_t* lsn) {
  *lsn = 0;
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = NowMs();
  StrEntry* e = StrFindLocked(key, now, lsn);
  if (e == nullptr) {
    if (IsNamespaceKeyLocked(key)) return Status::WrongType();
    ++key_misses_;
    return StrRef();
  }
  ++key_hits_;
  StrRef v = e->value;
  StrTouchLocked(*e);
  if (expire_at_ms > 0 && expire_at_ms <= now) {
    PION_RETURN_IF_ERROR(StrRemoveLocked(strings_.find(key), 0, lsn));
  } else if (expire_at_ms > 0 || (persist && e->expire_at_ms != 0)) {
    int64_t at = persist ? 0 : expire_at_ms;
    if (sink_) {
      auto r = sink_->OnStrExpire(key, at);
      if (!r.ok()) return r.status();
      *lsn = std::max(*lsn, *r);
    }
    StrSetExpireLocked(*e, at);
    e->version = ++str_version_;
  }
  return v;
}

Result<uint64_t> Store::StrAppend(std::string_view key, std::string_view tail, uint64_t* lsn,
                                  StrRef tail_value) {
  *lsn = 0;
  std::vector<StrPending> pend(1);
  uint64_t len = 0;
  {
    std::shared_lock<std::shared_mutex> gate(gate_);
    std::lock_guard<std::mutex> l(mu_);
    if (IsNamespaceKeyLocked(key)) return Status::WrongType();
    if (key.size() > kMaxStrKeyBytes) return Status::InvalidArgument("key too long");
    StrEntry* e = StrFindLocked(key, NowMs(), lsn);
    std::string_view head = e != nullptr ? e->value->view() : std::string_view();
    StrRef value;
    if (head.empty() && tail_value != nullptr && tail_value->size == tail.size()) {
      value = std::move(tail_value);
    } else {
      auto v = StrValue::TryMake(head.size() + tail.size());
      if (!v) return Status::OutOfBudget("out of memory");
      if (!head.empty()) std::memcpy(v->data, head.data(), head.size());
      if (!tail.empty()) std::memcpy(v->data + head.size(), tail.data(), tail.size());
      value = std::move(v);
    }
    int64_t expire = e != nullptr ? e->expire_at_ms : 0;
    uint64_t need = StrCharge(key, value);
    uint64_t have = e != nullptr ? StrCharge(key, e->value) : 0;
    if (cfg_.max_bytes > 0 && need > have) {
      if (need > cfg_.max_bytes) return Status::OutOfBudget("");
      PION_RETURN_IF_ERROR(EvictLocked(
          nullptr, [&] { return bytes_ - have + need <= cfg_.max_bytes; }, lsn, key, true));
    }
    PION_RETURN_IF_ERROR(StrLogSetLocked(key, value, expire, &pend[0]));
    BeginPending();
    len = value->size;
  }
  PION_RETURN_IF_ERROR(StrFinish(pend, lsn));
  return len;
}

std::vector<StrRef> Store::StrMGet(std::span<const std::string_view> keys) {
  std::vector<StrRef> out(keys.size());
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = NowMs();
  uint64_t unused = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    StrEntry* e = StrFindLocked(keys[i], now, &unused);
    if (e == nullptr) {
      ++key_misses_;
      continue;
    }
    ++key_hits_;
    StrTouchLocked(*e);
    out[i] = e->value;
  }
  return out;
}

Result<bool> Store::StrMSet(std::span<const std::string_view> kv, bool nx, uint64_t* lsn,
                            std::span<const StrRef> made) {
  *lsn = 0;
  std::vector<StrRef> values(kv.size() / 2);
  for (size_t i = 0; i + 1 < kv.size(); i += 2) {
    if (kv[i].size() > kMaxStrKeyBytes) return Status::InvalidArgument("key too long");
    if (i / 2 < made.size() && made[i / 2] != nullptr) {
      values[i / 2] = made[i / 2];
      continue;
    }
    auto v = StrValue::Copy(kv[i + 1]);
    if (!v) return Status::OutOfBudget("out of memory");
    values[i / 2] = std::move(v);
  }
  std::vector<StrPending> pend;
  pend.reserve(values.size());
  Status st;
  {
    std::shared_lock<std::shared_mutex> gate(gate_);
    std::lock_guard<std::mutex> l(mu_);
    int64_t now = NowMs();
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
      for (size_t i = 0; i + 1 < kv.size(); i += 2) {
        auto it = strings_.find(kv[i]);
        if (it != strings_.end()) have += StrCharge(kv[i], it->second.value);
      }
      PION_RETURN_IF_ERROR(EvictLocked(
          nullptr, [&] { return bytes_ - std::min(have, bytes_) + need <= cfg_.max_bytes; }, lsn,
          kv[0], true));
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

uint64_t Store::KeysExist(std::span<const std::string_view> keys) {
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = NowMs();
  uint64_t n = 0, unused = 0;
  for (std::string_view k : keys)
    if (StrFindLocked(k, now, &unused) != nullptr || IsNamespaceKeyLocked(k)) ++n;
  return n;
}

Result<uint64_t> Store::KeysDelete(std::span<const std::string_view> keys, uint64_t* lsn,
                                   const std::function<bool(std::string_view ns)>& may_drop) {
  *lsn = 0;
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = NowMs();
  if (may_drop) {
    // As Drop: every namespace a key would remove, descendants included, is
    // asked before anything is removed; one refusal refuses the whole call.
    std::vector<const Namespace*> todo;
    for (std::string_view k : keys) {
      auto sit = strings_.find(k);
      if (sit != strings_.end() && !Expired(sit->second, now)) continue;  // a string key
      std::string_view ns = k;
      Side side;
      auto it = map_.find(ns);
      if (it == map_.end() && ParseSessionId(k, &ns, &side)) it = map_.find(ns);
      if (it != map_.end()) todo.push_back(it->second.get());
    }
    while (!todo.empty()) {
      const Namespace* n = todo.back();
      todo.pop_back();
      if (!may_drop(n->name))
        return Status(Code::kInvalidArgument, "drop refused", ErrorId::kDropRefused);
      todo.insert(todo.end(), n->children.begin(), n->children.end());
    }
  }
  uint64_t n = 0;
  for (std::string_view k : keys) {
    if (StrFindLocked(k, now, lsn) != nullptr) {
      PION_RETURN_IF_ERROR(StrRemoveLocked(strings_.find(k), 0, lsn));
      ++n;
      continue;
    }
    std::string_view ns = k;
    Side side;
    auto it = map_.find(ns);
    if (it == map_.end() && ParseSessionId(k, &ns, &side)) it = map_.find(ns);
    if (it == map_.end()) continue;
    NsPtr victim = it->second;
    // With its descendants (store.h "Lineage"), each counted as a key removed.
    PION_RETURN_IF_ERROR(RemoveSubtreeLocked(victim, DropReason::kDrop, lsn, &n));
  }
  return n;
}

KeyType Store::TypeOf(std::string_view key) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t unused = 0;
  if (StrFindLocked(key, NowMs(), &unused) != nullptr) return KeyType::kString;
  return IsNamespaceKeyLocked(key) ? KeyType::kKvPrefix : KeyType::kNone;
}

Status Store::Rename(std::string_view src, std::string_view dst, bool nx, bool* done,
                     uint64_t* lsn) {
  *lsn = 0;
  *done = false;
  if (dst.size() > kMaxStrKeyBytes) return Status::InvalidArgument("key too long");
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = NowMs();
  StrEntry* e = StrFindLocked(src, now, lsn);
  if (e == nullptr) {
    if (IsNamespaceKeyLocked(src)) return Status::NotSupported("RENAME of a pion-kvprefix key");
    return Status::NotFound("no such key");
  }
  bool dst_ns = IsNamespaceKeyLocked(dst);
  bool dst_str = StrFindLocked(dst, now, lsn) != nullptr;
  if (nx && (dst_ns || dst_str)) return Status::OK();
  *done = true;
  if (src == dst) return Status::OK();
  if (dst_ns) return Status::WrongType();
  if (sink_) {
    auto r = sink_->OnStrRename(src, dst);
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  StrRef v = e->value;
  int64_t expire = e->expire_at_ms;
  StrEraseLocked(strings_.find(src));
  StrPutLocked(dst, std::move(v), expire);
  return Status::OK();
}

Result<bool> Store::Expire(std::string_view key, int64_t at_ms, ExpireCond c, uint64_t* lsn) {
  *lsn = 0;
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = NowMs();
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
  }
  if (at_ms <= now) {
    PION_RETURN_IF_ERROR(StrRemoveLocked(strings_.find(key), 0, lsn));
    return true;
  }
  if (sink_) {
    auto r = sink_->OnStrExpire(key, at_ms);
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  StrSetExpireLocked(*e, at_ms);
  e->version = ++str_version_;
  return true;
}

int64_t Store::ExpireTimeMs(std::string_view key) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t unused = 0;
  StrEntry* e = StrFindLocked(key, NowMs(), &unused);
  if (e == nullptr) return IsNamespaceKeyLocked(key) ? -1 : -2;
  return e->expire_at_ms == 0 ? -1 : e->expire_at_ms;
}

Result<bool> Store::Persist(std::string_view key, uint64_t* lsn) {
  *lsn = 0;
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  StrEntry* e = StrFindLocked(key, NowMs(), lsn);
  if (e == nullptr || e->expire_at_ms == 0) return false;
  if (sink_) {
    auto r = sink_->OnStrExpire(key, 0);
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  StrSetExpireLocked(*e, 0);
  e->version = ++str_version_;
  return true;
}

ScanResult Store::Scan(uint64_t cursor, uint64_t count, std::optional<std::string_view> match,
                       KeyType type) {
  ScanResult out;
  if (count == 0) count = 10;
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = NowMs();
  auto it = scan_order_.lower_bound({cursor, nullptr});
  uint64_t taken = 0;
  uint64_t last = 0;
  bool done = true;
  for (; it != scan_order_.end(); ++it) {
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
    for (auto& [name, n] : map_) {
      uint64_t h = KeyHash(name);
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
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = NowMs();
  for (auto& [k, e] : strings_)
    if (!Expired(e, now) && GlobMatch(pattern, k, false)) out.push_back(k);
  for (auto& [name, n] : map_)
    if (GlobMatch(pattern, name, false)) out.push_back(name);
  return out;
}

std::optional<std::string> Store::RandomKey() {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t total = strings_.size() + map_.size();
  if (total == 0) return std::nullopt;
  rand_state_ ^= rand_state_ << 13, rand_state_ ^= rand_state_ >> 7,
      rand_state_ ^= rand_state_ << 17;
  uint64_t r = rand_state_ % total;
  if (r >= strings_.size()) {
    auto it = map_.begin();
    std::advance(it, static_cast<long>(r - strings_.size()));
    return it->first;
  }
  size_t nb = strings_.bucket_count();
  size_t b0 = static_cast<size_t>(rand_state_ >> 20) % nb;
  for (size_t k = 0; k < nb; ++k) {
    size_t b = (b0 + k) % nb;
    if (strings_.begin(b) != strings_.end(b)) return strings_.begin(b)->first;
  }
  return std::nullopt;
}

uint64_t Store::DbSize() const {
  std::lock_guard<std::mutex> l(mu_);
  return strings_.size() + map_.size();
}

uint64_t Store::KeyMemory(std::string_view key) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t unused = 0;
  if (StrEntry* e = StrFindLocked(key, NowMs(), &unused)) return StrCharge(key, e->value);
  auto it = map_.find(key);
  if (it != map_.end()) return it->second->bytes + key.size() + kStrEntryOverhead;
  return 0;
}

uint64_t Store::ExpireActive(uint64_t max_keys) {
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = NowMs();
  uint64_t n = 0, unused = 0;
  while (n < max_keys && !expiry_order_.empty() && expiry_order_.begin()->first <= now) {
    StrEntry* e = expiry_order_.begin()->second;
    if (!StrRemoveLocked(strings_.find(*e->key), 2, &unused).ok()) break;
    ++n;
  }
  return n;
}

KeyspaceStats Store::KeyStats() const {
  KeyspaceStats s;
  std::lock_guard<std::mutex> l(mu_);
  s.keys = strings_.size() + map_.size();
  s.expires = expiry_order_.size();
  if (!expiry_order_.empty()) {
    int64_t avg = expire_sum_ms_ / static_cast<int64_t>(expiry_order_.size()) - NowMs();
    s.avg_ttl_ms = avg > 0 ? static_cast<uint64_t>(avg) : 0;
  }
  s.string_bytes = str_bytes_;
  s.hits = key_hits_;
  s.misses = key_misses_;
  s.expired = expired_keys_;
  s.evicted_keys = evicted_strings_ + evictions_ / 2;
  return s;
}

void Store::ResetKeyStats() {
  std::lock_guard<std::mutex> l(mu_);
  key_hits_ = key_misses_ = expired_keys_ = 0;
}

uint64_t Store::KeyVersion(std::string_view key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = strings_.find(key);
  if (it != strings_.end()) return it->second.version;
  auto ns = map_.find(key);
  if (ns != map_.end()) return (uint64_t{1} << 63) | ns->second->incarnation;
  return str_removals_ | (uint64_t{1} << 62);
}

void Store::SetEvictPolicy(EvictPolicy p) {
  std::lock_guard<std::mutex> l(mu_);
  policy_ = p;
}

EvictPolicy Store::evict_policy() const {
  std::lock_guard<std::mutex> l(mu_);
  return policy_;
}

// ---- recovery ----

void Store::ApplyStrSet(std::string_view key, int64_t expire_at_ms, uint64_t lru_stamp,
                        std::span<const uint8_t> value) {
  std::lock_guard<std::mutex> l(mu_);
  if (expire_at_ms != 0 && expire_at_ms <= NowMs()) {
    auto it = strings_.find(key);
    if (it != strings_.end()) StrEraseLocked(it);
    return;
  }
  auto v =
      StrValue::Copy(std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
  PION_CHECK(v != nullptr);
  if (IsNamespaceKeyLocked(key)) return;  // cannot happen in a log the server wrote
  uint64_t need = StrCharge(key, v);
  if (cfg_.max_bytes > 0) {
    uint64_t unused = 0;
    auto it = strings_.find(key);
    uint64_t have = it != strings_.end() ? StrCharge(key, it->second.value) : 0;
    (void)EvictLocked(
        nullptr, [&] { return bytes_ - have + need <= cfg_.max_bytes; }, &unused, key, true);
  }
  StrEntry& e = StrPutLocked(key, std::move(v), expire_at_ms);
  if (lru_stamp != 0) {
    e.stamp = lru_stamp;
    uint64_t c = lru_clock_.load(std::memory_order_relaxed);
    if (c < lru_stamp) lru_clock_.store(lru_stamp, std::memory_order_relaxed);
  }
}

void Store::ApplyStrDel(std::string_view key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = strings_.find(key);
  if (it != strings_.end()) StrEraseLocked(it);
}

void Store::ApplyStrExpire(std::string_view key, int64_t expire_at_ms) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = strings_.find(key);
  if (it == strings_.end()) return;
  if (expire_at_ms != 0 && expire_at_ms <= NowMs()) {
    StrEraseLocked(it);
    return;
  }
  StrSetExpireLocked(it->second, expire_at_ms);
}

void Store::ApplyStrRename(std::string_view src, std::string_view dst) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = strings_.find(src);
  if (it == strings_.end() || src == dst) return;
  StrRef v = it->second.value;
  int64_t expire = it->second.expire_at_ms;
  StrEraseLocked(it);
  StrPutLocked(dst, std::move(v), expire);
}

std::vector<persist::SnapshotString> Store::TakeCapturedStrings() {
  std::lock_guard<std::mutex> l(mu_);
  return std::move(captured_strings_);
}

}  // namespace pion::store
