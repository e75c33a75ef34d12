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
#include "store/store.h"

namespace pion::store {

void Store::FinishTierAdoption() {
  if (tier_) tier_->FinishAdopt();
  const uint64_t adopted = tier_adopted_.load(std::memory_order_relaxed);
  const uint64_t dropped = tier_adopt_drops_.load(std::memory_order_relaxed);
  if (adopted > 0 || dropped > 0)
    LOG_NOTICE("disk tier: %llu values adopted from %s, %llu dropped (missing or damaged)",
               static_cast<unsigned long long>(adopted),
               tier_ ? tier_->path().c_str() : "(no tier)",
               static_cast<unsigned long long>(dropped));
}

Status Store::SyncTierForSnapshot() { return tier_ ? tier_->Sync() : Status::OK(); }

void Store::SetSnapshotTierPins(std::vector<std::shared_ptr<const void>> pins) {
  std::vector<std::shared_ptr<const void>> old;
  {
    std::lock_guard<std::mutex> l(mu_);
    old.swap(snapshot_tier_pins_);
    snapshot_tier_pins_ = std::move(pins);
  }
  // `old` goes here, without mu_: the extents no entry holds any more are freed.
}

void Store::ApplyStrTier(const persist::StrTierRecord& r) {
  std::lock_guard<std::mutex> l(mu_);
  if (StrEntry* e = StrEntryLocked(r.key)) StrEraseLocked(*e);  // (one section per key)
  if (r.expire_at_ms != 0 && r.expire_at_ms <= NowMs()) return;
  if (IsNamespaceKeyLocked(r.key)) return;  // cannot happen in a snapshot the server wrote
  const int klen = static_cast<int>(std::min<size_t>(r.key.size(), 128));
  if (!tier_) {
    tier_adopt_drops_.fetch_add(1, std::memory_order_relaxed);
    ++evicted_strings_;
    LOG_WARNING("snapshot: '%.*s' is in the disk tier, but no tier-dir is set: dropped", klen,
                r.key.data());
    return;
  }
  tier::ExtentId id;
  id.offset = r.extent.offset;
  id.length = r.extent.length;
  id.header_bytes = r.extent.header_bytes;
  id.value_len = r.value_len;
  id.value_crc = r.extent.value_crc;
  id.seq = r.extent.seq;
  auto x = tier_->Adopt(r.key, id);
  if (!x.ok()) {
    // Never a wrong byte, never a failed start: the key goes as the tier drops entries.
    tier_adopt_drops_.fetch_add(1, std::memory_order_relaxed);
    tier_errors_.fetch_add(1, std::memory_order_relaxed);
    tier_evictions_.fetch_add(1, std::memory_order_relaxed);
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
        nullptr, [&] { return bytes_ + need <= cfg_.max_bytes; }, &unused, r.key, true);
  }
  StrEntry& e = StrPutLocked(r.key, std::move(ref), r.expire_at_ms);
  tier_adopted_.fetch_add(1, std::memory_order_relaxed);
  if (r.lru_stamp != 0) {
    {
      Shard& sh = ShardFor(r.key);
      std::lock_guard<std::mutex> sl(sh.mu);
      e.stamp = r.lru_stamp;
    }
    RaiseClockAbove(r.lru_stamp);
  }
}

}  // namespace pion::store
