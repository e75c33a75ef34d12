// Read-modify-write of string keys (store.h "StrPatch"): APPEND, SETRANGE,
// the INCR family and the bit commands edit a value where it lies, logged as
// a STRPATCH record holding only the bytes written; COPY, TOUCH and OBJECT's
// view of a key.
//
// In-place edits: a value is changed in place only under ks_.mu and its shard's
// lock, and only while the store holds its sole reference (use_count() == 1):
// GET replies, pending STRSET writes, snapshots and COPY's other key all hold
// their own reference, so they keep seeing the bytes they took (the edit goes
// to a copy, which replaces the store's reference). A copy made to grow is
// given room ahead (twice the new length up to 1 MiB, then 1 MiB more, as
// Redis's sds), so N appends of k bytes copy O(N k) bytes in all.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "base/check.h"
#include "base/clock.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

namespace {

constexpr uint64_t kGreedyLimit = uint64_t{1} << 20;

// The capacity a value growing to `n` bytes is given.
uint64_t GrowCapacity(uint64_t n) { return n < kGreedyLimit ? n * 2 : n + kGreedyLimit; }

}  // namespace

Result<uint64_t> Store::StrPatch(std::string_view key, const StrPlanFn& plan, uint64_t* lsn) {
  *lsn = 0;
  if (key.size() > kMaxStrKeyBytes)
    return Status(Code::kInvalidArgument, Reason::kKeyTooLong, {}, "key too long");
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  if (IsNamespaceKeyLocked(key)) return Status::WrongType();
  StrEntry* e = StrFindLocked(key, UnixMillis(), lsn);
  // A quantized block's bytes are no string to edit (docs/protocol.md "Block formats").
  if (e != nullptr && e->value->quantized())
    return Status(Code::kInvalidArgument, Reason::kBlockQuantized, {}, "quantized block");
  std::string_view cur = e != nullptr ? e->value->view() : std::string_view();
  StrEdit ed;
  PION_RETURN_IF_ERROR(plan(cur, e != nullptr, &ed));
  if (!ed.write) return static_cast<uint64_t>(cur.size());
  const uint64_t end = ed.offset + ed.bytes.size();
  if (end < ed.offset)
    return Status(Code::kInvalidArgument, Reason::kEditRange, {}, "edit out of range");
  const uint64_t new_len = ed.truncate ? end : std::max<uint64_t>(cur.size(), end);
  const StrValue* old = e != nullptr ? e->value.get() : nullptr;
  // The acquire fence pairs with the release of the last other reference, so
  // its holder's reads happen before our writes.
  bool in_place =
      old != nullptr && !old->tiered() && e->value.use_count() == 1 && new_len <= old->capacity;
  if (in_place) std::atomic_thread_fence(std::memory_order_acquire);
  std::shared_ptr<StrValue> fresh;
  if (!in_place) {
    uint64_t cap = new_len;
    if (old != nullptr && new_len > cur.size()) cap = GrowCapacity(new_len);
    fresh = StrValue::TryMake(cap);
    if (!fresh) return Status(Code::kOutOfBudget, Reason::kNoMemory, {}, "out of memory");
  }
  uint64_t need = key.size() + (in_place ? old->capacity : fresh->capacity) + kStrEntryOverhead;
  uint64_t have = e != nullptr ? StrCharge(key, e->value) : 0;
  if (cfg_.max_bytes > 0 && need > have) {
    if (need > cfg_.max_bytes) return Status::OutOfBudget("");
    PION_RETURN_IF_ERROR(EvictLocked(
        nullptr, [&]() REQUIRES(ks_.mu) { return bytes_ - have + need <= cfg_.max_bytes; }, lsn,
        key, true));
  }
  const int64_t expire = e != nullptr ? e->expire_at_ms : 0;
  if (sink_) {
    persist::StrPatchRec rec;
    rec.key = key;
    rec.expire_at_ms = expire;
    rec.truncate = ed.truncate;
    rec.offset = ed.offset;
    rec.bytes = {reinterpret_cast<const uint8_t*>(ed.bytes.data()), ed.bytes.size()};
    auto r = sink_->Log(rec);
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  if (in_place) {
    Shard& sh = ks_.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    StrValue* v = const_cast<StrValue*>(old);
    if (ed.offset > v->size) std::memset(v->data + v->size, 0, ed.offset - v->size);
    if (!ed.bytes.empty()) std::memcpy(v->data + ed.offset, ed.bytes.data(), ed.bytes.size());
    v->size = new_len;
    v->edited = ed.edited;
    e->version = ks_.NextVersionLocked();
    ks_.TouchLocked(sh, *e);
    return new_len;
  }
  uint64_t keep = std::min<uint64_t>(cur.size(), new_len);
  if (keep > 0) std::memcpy(fresh->data, cur.data(), keep);
  if (ed.offset > keep) std::memset(fresh->data + keep, 0, ed.offset - keep);
  if (!ed.bytes.empty()) std::memcpy(fresh->data + ed.offset, ed.bytes.data(), ed.bytes.size());
  fresh->size = new_len;
  fresh->edited = ed.edited;
  StrPutLocked(key, std::move(fresh), expire, e);
  return new_len;
}

Result<uint64_t> Store::StrAppend(std::string_view key, std::string_view tail, uint64_t* lsn,
                                  StrRef tail_value, uint64_t max_len) {
  // A key that does not exist takes an adopted tail as its value (no copy);
  // bounded retries for a key created or removed meanwhile.
  for (int attempt = 0;; ++attempt) {
    bool create = false;
    auto r = StrPatch(
        key,
        [&](std::string_view cur, bool exists, StrEdit* ed) {
          if (!exists && tail_value != nullptr && tail_value->size == tail.size() && attempt < 3) {
            create = true;
            ed->write = false;
            return Status::OK();
          }
          if (exists && max_len > 0 && cur.size() + tail.size() > max_len)
            return Status(Code::kInvalidArgument, Reason::kStringTooBig, {max_len},
                          "string exceeds proto-max-bulk-len");
          ed->offset = cur.size();
          ed->bytes = tail;
          ed->edited = exists;
          return Status::OK();
        },
        lsn);
    if (!r.ok() || !create) return r;
    SetOptions o;
    o.cond = SetOptions::Cond::kNx;
    auto s = StrSet(key, tail_value, o, lsn);
    if (!s.ok()) return s.status();
    if (s->done) return static_cast<uint64_t>(tail.size());
  }
}

Result<bool> Store::StrCopy(std::string_view src, std::string_view dst, bool replace,
                            uint64_t* lsn) {
  *lsn = 0;
  if (dst.size() > kMaxStrKeyBytes)
    return Status(Code::kInvalidArgument, Reason::kKeyTooLong, {}, "key too long");
  StrPending pend[1];
  {
    base::ReaderLock gate(&gate_);
    base::MutexLock l(&ks_.mu);
    int64_t now = UnixMillis();
    StrEntry* e = StrFindLocked(src, now, lsn);
    if (e == nullptr) {
      if (IsNamespaceKeyLocked(src))
        return Status(Code::kNotSupported, Reason::kCopyNamespace, {}, "COPY of a namespace key");
      return false;
    }
    if (IsNamespaceKeyLocked(dst)) {
      if (!replace) return false;
      return Status::WrongType();
    }
    StrEntry* d = StrFindLocked(dst, now, lsn);
    if (d != nullptr && !replace) return false;
    if (e->value->quantized())
      return Status(Code::kInvalidArgument, Reason::kBlockQuantized, {}, "quantized block");
    StrRef v = e->value;
    int64_t expire = e->expire_at_ms;
    uint64_t need = StrCharge(dst, v);
    uint64_t have = d != nullptr ? StrCharge(dst, d->value) : 0;
    if (cfg_.max_bytes > 0 && need > have) {
      if (need > cfg_.max_bytes) return Status::OutOfBudget("");
      PION_RETURN_IF_ERROR(EvictLocked(
          nullptr, [&]() REQUIRES(ks_.mu) { return bytes_ - have + need <= cfg_.max_bytes; }, lsn,
          dst, true));
    }
    PION_RETURN_IF_ERROR(StrLogSetLocked(dst, v, expire, &pend[0]));
    BeginPending();
  }
  PION_RETURN_IF_ERROR(StrFinish(pend, lsn));
  return true;
}

uint64_t Store::KeysTouch(std::span<const std::string_view> keys) {
  base::MutexLock l(&ks_.mu);
  int64_t now = UnixMillis();
  uint64_t n = 0, unused = 0;
  for (std::string_view k : keys) {
    if (StrEntry* e = StrFindLocked(k, now, &unused)) {
      Shard& sh = ks_.ShardFor(k);
      base::MutexLock sl(&sh.mu);
      ++sh.hits;
      ks_.TouchLocked(sh, *e);
      ++n;
    } else if (IsNamespaceKeyLocked(k)) {
      ++n;
    } else {
      CountHitOrMiss(k, false);
    }
  }
  return n;
}

void Store::SetIdleTime(std::string_view key, uint64_t idle_s) {
  base::MutexLock l(&ks_.mu);
  if (StrEntry* e = ks_.FindStringLocked(key)) {
    Shard& sh = ks_.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    int64_t at = UnixSeconds() - static_cast<int64_t>(std::min<uint64_t>(idle_s, UINT32_MAX));
    e->atime_s = static_cast<uint32_t>(std::max<int64_t>(at, 0));
  }
}

KeyObject Store::ObjectOf(std::string_view key) {
  KeyObject out;
  base::MutexLock l(&ks_.mu);
  uint64_t unused = 0;
  if (StrEntry* e = StrFindLocked(key, UnixMillis(), &unused)) {
    Shard& sh = ks_.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    out.type = KeyType::kString;
    out.value = e->value;
    int64_t idle = UnixSeconds() - static_cast<int64_t>(e->atime_s);
    out.idle_s = idle > 0 ? static_cast<uint64_t>(idle) : 0;
    out.freq = ks_.LfuDecayed(*e);
    return out;
  }
  if (IsNamespaceKeyLocked(key)) out.type = KeyType::kKvPrefix;
  return out;
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
      StrValue::TryMake(e != nullptr && new_len > cur.size() ? GrowCapacity(new_len) : new_len);
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

}  // namespace pion::store
