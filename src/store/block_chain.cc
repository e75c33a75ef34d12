// KV.BLOCK.CHAIN (store/block_ops.h): a run of block keys written as one log
// record and linked as a chain, and what a block key carries. The links
// themselves are the keyspace's (store/block_links.cc: link and unlink,
// ancestors' stamps, a chain's apply, live and replayed).
//
// A CHAIN reserves its STRCHAIN record under the gate and ks.mu, applies it
// there, and writes the values to the log once ks.mu is released; a failed
// write undoes the keys it put, each where nothing replaced it since.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "base/check.h"
#include "base/clock.h"
#include "store/block_ops.h"

namespace pion::store {

Status OpBlockChain(const OpArgs& op, std::span<const std::string_view> kv, const ChainArgs& a,
                    std::span<const StrRef> made) {
  const Slice& s = op.slice;
  uint64_t* lsn = op.lsn;
  *lsn = 0;
  const size_t n = kv.size() / 2;
  std::vector<std::string_view> keys(n);
  std::vector<StrRef> values(n);
  std::vector<uint64_t> hashes;
  if (!a.hashes.empty()) {
    hashes.resize(n);
    std::memcpy(hashes.data(), a.hashes.data(), n * 8);
  }
  for (size_t i = 0; i < n; ++i) {
    keys[i] = kv[2 * i];
    PION_RETURN_IF_ERROR(CheckKeyLength(keys[i]));
    if (i < made.size() && made[i] != nullptr) {
      values[i] = made[i];
      continue;
    }
    // FORMAT: the command layer quantized every value (a tag without one is a bug).
    PION_CHECK(a.quant.row == 0);
    values[i] = StrValue::Copy(kv[2 * i + 1]);
    if (!values[i]) return Status(Code::kOutOfBudget, Reason::kNoMemory, {}, "out of memory");
  }
  // What a failed log write restores.
  struct Previous {
    StrRef value;  // null: the key did not exist
    int64_t expire = 0;
  };
  std::vector<Previous> previous(n);
  PendingRecord rec;
  {
    base::ReaderLock gate(&s.gate());
    base::MutexLock l(&s.ks.mu);
    const int64_t now = UnixMillis();
    uint64_t need = 0, have = 0;
    for (size_t i = 0; i < n; ++i) {
      if (s.IsNamespaceKeyLocked(keys[i])) return Status::WrongType();
      if (StrEntry* e = s.FindLocked(keys[i], now, lsn)) {
        previous[i] = {e->value, e->expire_at_ms};
        have += StrCharge(keys[i], e->value);
      }
      need += StrCharge(keys[i], values[i]);
    }
    StrEntry* after = a.has_after ? s.FindLocked(a.after, now, lsn) : nullptr;
    const uint64_t max_bytes = s.ConfigLocked().max_bytes;
    if (max_bytes > 0 && need > have) {
      if (need > max_bytes) return Status::OutOfBudget("");
      // Never evicted for this write: the keys written and the chain it continues.
      std::vector<StrEntry*> held;
      for (StrEntry* p = after; p != nullptr; p = p->block ? p->block->parent : nullptr) {
        if (p->held) break;
        p->held = true;
        held.push_back(p);
      }
      for (std::string_view k : keys)
        if (StrEntry* e = s.ks.FindStringLocked(k); e != nullptr && !e->held) {
          e->held = true;
          held.push_back(e);
        }
      Status st = s.EvictLocked(
          nullptr,
          [&]() REQUIRES(s.ks.mu) {
            const uint64_t used = s.ChargedLocked();
            return used - std::min(have, used) + need <= max_bytes;
          },
          lsn);
      for (StrEntry* e : held) e->held = false;
      PION_RETURN_IF_ERROR(st);
    }
    if (s.logging()) {
      std::vector<persist::StrChainEntry> entries(n);
      for (size_t i = 0; i < n; ++i)
        entries[i] = {keys[i], hashes.empty() ? 0 : hashes[i], values[i]->size, {}};
      persist::StrChainRecord r;
      r.has_after = after != nullptr;
      if (after != nullptr) r.after = a.after;
      r.has_hashes = !hashes.empty();
      r.tokens = a.tokens;
      r.expire_at_ms = a.expire_at_ms;
      if (a.quant.row != 0) r.quant = QuantRecordOf(a.quant);
      r.entries = entries;
      PION_RETURN_IF_ERROR(s.ReserveLocked(r, &rec));
    }
    s.ApplyChainLocked(keys, values, after, a.expire_at_ms, hashes, a.tokens);
    s.BeginPending();
  }
  Status st;
  if (rec.write_parts || rec.write) {
    std::vector<std::span<const uint8_t>> parts(n);
    for (size_t i = 0; i < n; ++i) parts[i] = {values[i]->data, values[i]->size};
    Result<uint64_t> r = rec.write_parts ? rec.write_parts(parts) : Result<uint64_t>(uint64_t{0});
    if (r.ok()) {
      *lsn = std::max(*lsn, *r);
    } else {
      st = r.status();
      // Not in the log: undone, key by key, where nothing replaced it since.
      base::MutexLock l(&s.ks.mu);
      for (size_t i = n; i-- > 0;) {
        StrEntry* e = s.ks.FindStringLocked(keys[i]);
        if (e == nullptr || e->value != values[i]) continue;
        if (previous[i].value)
          s.PutLocked(keys[i], previous[i].value, previous[i].expire, e);
        else
          s.EraseLocked(*e);
      }
    }
  }
  s.EndPending();
  return st;
}

bool OpDescribeBlock(const OpArgs& op, std::string_view key, BlockInfo* out) {
  const Slice& s = op.slice;
  base::MutexLock l(&s.ks.mu);
  const StrEntry* e = s.FindLocked(key, UnixMillis(), nullptr);
  if (e == nullptr) return false;
  *out = BlockInfo{};
  out->stamp = e->stamp;
  if (e->block) {
    out->has_parent = e->block->parent != nullptr;
    if (out->has_parent) out->parent = *e->block->parent->key;
    out->children = e->block->children.size();
    out->has_hash = e->block->has_hash;
    out->hash = e->block->hash;
    out->tokens = e->block->tokens;
  }
  return true;
}

}  // namespace pion::store
