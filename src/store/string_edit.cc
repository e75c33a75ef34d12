// Read-modify-write of string keys (store/string_ops.h "OpPatch"): APPEND,
// SETRANGE, the INCR family and the bit commands edit a value where it lies,
// logged as a STRPATCH record holding only the bytes written.
//
// In-place edits: a value is changed in place only under ks.mu and its shard's
// lock, and only while the store holds its sole reference (use_count() == 1):
// GET replies, pending STRSET writes, snapshots and COPY's other key all hold
// their own reference, so they keep seeing the bytes they took (the edit goes
// to a copy, which replaces the store's reference). A copy made to grow is
// given room ahead (StrGrowCapacity), so N appends of k bytes copy O(N k)
// bytes in all.
//
// A value on the disk tier is edited from bytes read with the tier's check
// (as GET reads them), with no lock held, then the edit starts over under
// its locks: a damaged extent is never copied into the new value; it is
// dropped as the tier drops entries, and the edit finds no key.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "base/clock.h"
#include "store/string_ops.h"

namespace pion::store {

namespace {

// How many times an edit reads a value on the disk tier before it gives up
// (each read finds another value there: a writer and the tier between).
constexpr int kMaxTierReads = 8;

// One try of OpPatch. A value on the disk tier is edited from bytes read
// with the tier's check: `checked` holds them when `from` is the value they
// were read from; otherwise nothing changes and *on_disk is the value to read
// (with no lock held) before the next try.
Result<uint64_t> PatchOnce(const OpArgs& op, std::string_view key, const StrPlanFn& plan,
                           const StrRef& from, const StrRef& checked, StrRef* on_disk) {
  const Slice& s = op.slice;
  uint64_t* lsn = op.lsn;
  base::ReaderLock gate(&s.gate());
  base::MutexLock l(&s.ks.mu);
  if (s.IsNamespaceKeyLocked(key)) return Status::WrongType();
  StrEntry* e = s.FindLocked(key, UnixMillis(), lsn);
  // A quantized block's bytes are no string to edit (docs/protocol.md "Block formats").
  if (e != nullptr && e->value->quantized())
    return Status(Code::kInvalidArgument, Reason::kBlockQuantized, {}, "quantized block");
  std::string_view cur;
  if (e != nullptr && e->value->on_disk()) {
    if (e->value != from || checked == nullptr) {
      *on_disk = e->value;
      return uint64_t{0};
    }
    cur = checked->view();
  } else if (e != nullptr) {
    cur = e->value->view();
  }
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
  // Not in place, `cur` is read after room is made; a disk tier move that
  // finishes meanwhile may replace the entry's value, so the bytes are held.
  StrRef cur_held;
  if (!in_place) {
    if (e != nullptr) cur_held = e->value;
    uint64_t cap = new_len;
    if (old != nullptr && new_len > cur.size()) cap = StrGrowCapacity(new_len);
    fresh = StrValue::TryMake(cap);
    if (!fresh) return Status(Code::kOutOfBudget, Reason::kNoMemory, {}, "out of memory");
  }
  uint64_t need = key.size() + (in_place ? old->capacity : fresh->capacity) + kStrEntryOverhead;
  uint64_t have = e != nullptr ? StrCharge(key, e->value) : 0;
  PION_RETURN_IF_ERROR(s.RoomLocked(key, e, need, have, lsn));
  const int64_t expire = e != nullptr ? e->expire_at_ms : 0;
  persist::StrPatchRec rec;
  rec.key = key;
  rec.expire_at_ms = expire;
  rec.truncate = ed.truncate;
  rec.offset = ed.offset;
  rec.bytes = {reinterpret_cast<const uint8_t*>(ed.bytes.data()), ed.bytes.size()};
  PION_RETURN_IF_ERROR(s.LogLocked(rec, lsn));
  if (in_place) {
    Shard& sh = s.ks.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    StrValue* v = const_cast<StrValue*>(old);
    if (ed.offset > v->size) std::memset(v->data + v->size, 0, ed.offset - v->size);
    if (!ed.bytes.empty()) std::memcpy(v->data + ed.offset, ed.bytes.data(), ed.bytes.size());
    v->size = new_len;
    v->edited = ed.edited;
    e->version = s.ks.NextVersionLocked();
    s.ks.TouchLocked(sh, *e);
    return new_len;
  }
  uint64_t keep = std::min<uint64_t>(cur.size(), new_len);
  if (keep > 0) std::memcpy(fresh->data, cur.data(), keep);
  if (ed.offset > keep) std::memset(fresh->data + keep, 0, ed.offset - keep);
  if (!ed.bytes.empty()) std::memcpy(fresh->data + ed.offset, ed.bytes.data(), ed.bytes.size());
  fresh->size = new_len;
  fresh->edited = ed.edited;
  s.PutLocked(key, std::move(fresh), expire, e);
  return new_len;
}

}  // namespace

Result<uint64_t> OpPatch(const OpArgs& op, std::string_view key, const StrPlanFn& plan) {
  *op.lsn = 0;
  PION_RETURN_IF_ERROR(CheckKeyLength(key));
  StrRef from, checked;
  for (int read = 0; read <= kMaxTierReads; ++read) {
    StrRef on_disk;
    Result<uint64_t> r = PatchOnce(op, key, plan, from, checked, &on_disk);
    if (on_disk == nullptr) return r;
    // The tier's checked read, with no lock held; a damaged value is dropped
    // (nullptr), and the next try finds no key.
    auto loaded = op.slice.LoadTiered(key, on_disk);
    if (!loaded.ok()) return loaded.status();
    from = std::move(on_disk);
    checked = std::move(*loaded);
  }
  return Status(Code::kBusy, Reason::kTierChanged, {}, "value changed on the disk tier");
}

Result<uint64_t> OpAppend(const OpArgs& op, std::string_view key, std::string_view tail,
                          StrRef tail_value, uint64_t max_len) {
  // A key that does not exist takes an adopted tail as its value (no copy);
  // bounded retries for a key created or removed meanwhile.
  for (int attempt = 0;; ++attempt) {
    bool create = false;
    auto r = OpPatch(op, key, [&](std::string_view cur, bool exists, StrEdit* ed) {
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
    });
    if (!r.ok() || !create) return r;
    SetOptions o;
    o.cond = SetOptions::Cond::kNx;
    auto set = OpSet(op, key, tail_value, o);
    if (!set.ok()) return set.status();
    if (set->done) return static_cast<uint64_t>(tail.size());
  }
}

}  // namespace pion::store
