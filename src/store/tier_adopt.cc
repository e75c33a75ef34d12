// A restart that adopts the disk tier's file (docs/tier_format.md §3): a
// default-path snapshot references the string values already in the tier
// (STRING_TIER sections) instead of copying them; loading it checks each
// referenced extent's header and makes the key a tiered entry again, with no
// value byte read into RAM. The extents the snapshot in place references are
// held here (snapshot_tier_pins_) so that the tier's allocator neither reuses
// nor punches them until the next default-path snapshot replaces it.
#include <algorithm>
#include <mutex>

#include "base/clock.h"
#include "base/log.h"
#include "store/expiry.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

namespace {

// The tier's identity of an extent a snapshot references (its header is
// checked against it on adoption).
tier::ExtentId ExtentIdOf(const persist::TierExtentRecord& e, uint64_t value_len) {
  tier::ExtentId id;
  id.offset = e.offset;
  id.length = e.length;
  id.header_bytes = e.header_bytes;
  id.value_len = value_len;
  id.value_crc = e.value_crc;
  id.seq = e.seq;
  return id;
}

}  // namespace

void Store::FinishTierAdoption() {
  if (tier_) tier_->FinishAdopt();
  const uint64_t adopted = tier_counters_.adopted();
  const uint64_t ns_adopted = tier_counters_.ns_adopted();
  const uint64_t dropped = tier_counters_.adopt_drops();
  if (adopted > 0 || dropped > 0)
    LOG_NOTICE("disk tier: %llu values adopted from %s, %llu dropped (missing or damaged)",
               static_cast<unsigned long long>(adopted),
               tier_ ? tier_->path().c_str() : "(no tier)",
               static_cast<unsigned long long>(dropped));
  if (ns_adopted > 0)
    LOG_NOTICE("disk tier: %llu namespaces adopted from %s",
               static_cast<unsigned long long>(ns_adopted),
               tier_ ? tier_->path().c_str() : "(no tier)");
}

Status Store::SyncTierForSnapshot() { return tier_ ? tier_->Sync() : Status::OK(); }

void Store::SetSnapshotTierPins(std::vector<std::shared_ptr<const void>> pins) {
  std::vector<std::shared_ptr<const void>> old;
  {
    base::MutexLock l(&ks_.mu);
    old.swap(snapshot_tier_pins_);
    snapshot_tier_pins_ = std::move(pins);
  }
  // `old` goes here, without ks_.mu: the extents no entry holds any more are freed.
}

void Store::ApplyStrTier(const persist::StrTierRecord& r) {
  base::MutexLock l(&ks_.mu);
  if (StrEntry* e = ks_.FindStringLocked(r.key)) StrEraseLocked(*e);  // (one section per key)
  if (r.expire_at_ms != 0 && r.expire_at_ms <= UnixMillis()) return;
  if (IsNamespaceKeyLocked(r.key)) return;  // cannot happen in a snapshot the server wrote
  const int klen = static_cast<int>(std::min<size_t>(r.key.size(), 128));
  if (!tier_) {
    tier_counters_.AdoptDropped();
    ++evicted_strings_;
    LOG_WARNING("snapshot: '%.*s' is in the disk tier, but no tier-dir is set: dropped", klen,
                r.key.data());
    return;
  }
  auto x = tier_->Adopt(r.key, ExtentIdOf(r.extent, r.value_len));
  if (!x.ok()) {
    // Never a wrong byte, never a failed start: the key goes as the tier drops entries.
    tier_counters_.AdoptDropped();
    tier_counters_.Failed();
    tier_counters_.Evicted();
    ++evicted_strings_;
    LOG_WARNING("disk tier: '%.*s' at %s offset %llu not adopted: %s (dropped)", klen, r.key.data(),
                tier_->path().c_str(), static_cast<unsigned long long>(r.extent.offset),
                x.status().ToString().c_str());
    return;
  }
  auto v = std::make_shared<StrValue>();
  v->data = const_cast<uint8_t*>((*x)->mapped());
  v->size = r.value_len;
  v->extent = *x;
  snapshot_tier_pins_.push_back(tier::PinForSnapshot(*x));  // the loaded snapshot references it
  StrRef ref = std::move(v);
  const uint64_t need = StrCharge(r.key, ref);
  if (cfg_.max_bytes > 0) {
    uint64_t unused = 0;
    (void)EvictLocked(
        nullptr, [&]() REQUIRES(ks_.mu) { return bytes_ + need <= cfg_.max_bytes; }, &unused, r.key,
        true);
  }
  StrEntry& e = StrPutLocked(r.key, std::move(ref), r.expire_at_ms);
  tier_counters_.AdoptedString();
  if (r.lru_stamp != 0) {
    {
      Shard& sh = ks_.ShardFor(r.key);
      base::MutexLock sl(&sh.mu);
      e.stamp = r.lru_stamp;
    }
    ks_.RaiseClockAbove(r.lru_stamp);
  }
}

void Store::ApplyNamespaceTier(const persist::NsTierRecord& r) {
  NsPtr n = Find(r.ns);
  if (!n || n->incarnation != r.incarnation) return;  // evicted while loading
  const uint32_t R = n->rows_per_chunk;
  const size_t rb = n->row_bytes;
  std::shared_ptr<tier::TierFile> tier;
  {
    base::MutexLock l(&ks_.mu);
    if (n->dropped) return;
    tier = tier_;
  }
  // The chunks must fit the namespace: each a chunk's first rows, in a slot
  // no ROWS section filled (a snapshot the server wrote always fits).
  std::string why;
  if (r.row_bytes != rb) why = "row size does not match the namespace";
  {
    SidesLock sides(*n);
    for (const persist::NsTierChunkRecord& c : r.chunks) {
      if (!why.empty()) break;
      const SideData& sd = n->sides[static_cast<int>(c.side)];
      sd.mu.AssertHeld();  // `sides`
      const uint64_t ci = c.start / R;
      if (c.layer >= kMaxLayers || c.start % R != 0 || c.rows > R || c.start + c.rows > kMaxTokens)
        why = "a chunk does not fit the namespace";
      else if (c.layer < sd.layers.size() && ci < sd.layers[c.layer].chunks.size() &&
               sd.layers[c.layer].chunks[ci] != nullptr)
        why = "a chunk the snapshot also holds rows of";
    }
  }
  Result<tier::ExtentRef> x = tier::ExtentRef();  // the adopted extent (why empty)
  if (why.empty() && tier != nullptr) {
    x = tier->Adopt(r.ns, ExtentIdOf(r.extent, r.value_len));
    if (!x.ok()) why = x.status().ToString();
  } else if (why.empty()) {
    why = "no tier-dir is set";
  }
  if (!why.empty()) {
    // Never a wrong row, never a failed start: the namespace goes (with its
    // children) as the tier drops entries.
    base::MutexLock l(&ks_.mu);
    tier_counters_.AdoptDropped();
    if (tier_) tier_counters_.Failed();
    LOG_WARNING("disk tier: namespace '%s' at %s offset %llu not adopted: %s (dropped)",
                n->name.c_str(), tier_ ? tier_->path().c_str() : "(no tier)",
                static_cast<unsigned long long>(r.extent.offset), why.c_str());
    if (n->dropped) return;
    uint64_t lsn = 0, removed = 0;
    if (RemoveSubtreeLocked(n, DropReason::kEviction, &lsn, &removed).ok()) {
      EvictedFromPoolLocked(n, nullptr);
      if (tier_) tier_counters_.Evicted(removed);
    }
    return;
  }
  // Each chunk borrows the tier's mapping at its place: no row read into RAM
  // (the whole extent is read and checked before the first read serves it).
  const tier::ExtentRef& ext = *x;
  const uint8_t* base = ext->mapped();
  SidesLock sides(*n);
  base::MutexLock l(&ks_.mu);
  if (n->dropped) return;
  uint64_t added = 0;
  for (const persist::NsTierChunkRecord& c : r.chunks) {
    SideData& sd = n->sides[static_cast<int>(c.side)];
    sd.mu.AssertHeld();  // `sides`
    if (sd.layers.size() <= c.layer) sd.layers.resize(c.layer + 1);
    Layer& L = sd.layers[c.layer];
    const uint64_t ci = c.start / R;
    if (L.chunks.size() <= ci) L.chunks.resize(ci + 1);
    L.chunks[ci] = Chunk::Borrow(base + c.value_offset, static_cast<uint32_t>(c.rows), rb, ext);
    const uint64_t end = c.start + c.rows;
    if (end > L.rows) {
      added += end - L.rows;
      sd.total_rows += end - L.rows;
      L.rows = end;
      if (c.layer == 0) sd.layer0_rows.store(end, std::memory_order_relaxed);
    }
  }
  bool all_in_tier = true;
  for (SideData& sd : n->sides) {
    sd.mu.AssertHeld();  // `sides`
    // Nothing is pending while loading: the reservations are the rows.
    sd.reserved_rows.resize(sd.layers.size());
    for (size_t i = 0; i < sd.layers.size(); ++i) {
      sd.reserved_rows[i] = sd.layers[i].rows;
      for (const std::shared_ptr<Chunk>& ch : sd.layers[i].chunks)
        if (ch != nullptr && ch->backing.get() != static_cast<const void*>(ext.get()))
          all_in_tier = false;
    }
    sd.reserved_total = sd.total_rows;
  }
  n->bytes += added * rb;
  bytes_ += added * rb;
  n->mapped_extent = ext;
  n->maps_tier.store(true, std::memory_order_release);
  if (all_in_tier && !n->tiered) {
    // In the tier again, as TierMoveNamespaceLocked leaves it: rows uncharged.
    const uint64_t rows_bytes = n->bytes - TableBytes(n->blocks);
    n->tiered = true;
    n->tier_extent = ext;
    n->tier_uncharged = rows_bytes;
    tier_uncharged_ += rows_bytes;
    bytes_ -= rows_bytes;
    ++tier_entries_;
  }
  snapshot_tier_pins_.push_back(tier::PinForSnapshot(ext));  // the loaded snapshot references it
  tier_counters_.AdoptedNamespace();
}

}  // namespace pion::store
