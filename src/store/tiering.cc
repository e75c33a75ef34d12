// The disk tier's side of the keyspace (store.h "Disk tier", docs/tier_format.md).
//
// A string value the budget pushes out of RAM (at least tier-min-value bytes,
// not pinned, not held by a CHAIN, its chain children already on disk) moves:
// the entry's value becomes a "moving" value that still points at the RAM bytes
// (kept alive by `backing`) but charges no RAM, the entry goes to its shard's
// tier list, and an I/O thread writes the extent. When the write is done the
// value is replaced by one that points into the tier's read-only mapping. Any
// reader that holds a value keeps its bytes (and its extent) alive, as for RAM
// values. No WAL record is written: a move changes where the bytes are, not
// what they are; the tier is a cache beside the WAL and snapshots.
//
// I/O threads never wait for ks_.mu: a finished write is queued (tier_done_) and
// applied by whoever holds ks_.mu next (a try-lock from the I/O thread, the next
// move, promotion, or the expiry cycle).
#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "base/clock.h"
#include "base/log.h"
#include "store/namespace.h"
#include "store/store.h"
#include "tier/tier_ring.h"

namespace pion::store {

Status Store::AttachTier(const std::string& dir, uint64_t max_bytes, uint64_t min_value,
                         uint64_t queue_bytes, uint32_t io_threads, bool adopt) {
  auto f = tier::TierFile::Open(dir, max_bytes, adopt);
  if (!f.ok()) return f.status();
  auto io = std::make_unique<base::ThreadPool>(std::max<uint32_t>(1, io_threads), "pion-tier");
  io->Start();
  base::MutexLock l(&ks_.mu);
  tier_ = std::move(*f);
  tier_io_ = std::move(io);
  tier_min_value_ = min_value;
  tier_backlog_.SetLimit(queue_bytes);
  return Status::OK();
}

void Store::DetachTier() {
  // What is freed from now on stays on disk: the snapshot in place may
  // reference it for the next start (docs/tier_format.md §3).
  if (tier_) tier_->KeepFreedExtents();
  if (tier_io_) tier_io_->Stop();  // finishes the queued writes and reads
  base::MutexLock l(&ks_.mu);
  if (tier_) TierApplyDoneLocked();
}

void Store::SetTierMaxBytes(uint64_t n) {
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  if (!tier_) return;
  tier_->set_max_bytes(n);
  TierApplyDoneLocked();
  uint64_t lsn = 0;
  while (tier_->used_bytes() > n && TierDropOldestLocked(nullptr, &lsn)) {
  }
}

uint64_t Store::MoveOverBudgetToTier() {
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  if (!tier_ || cfg_.max_bytes == 0) return 0;
  uint64_t moved = 0, lsn = 0;
  // Bounded: every entry is looked at once at most.
  for (uint64_t tries = StrCountLocked() + NsCountLocked(); bytes_ > cfg_.max_bytes && tries > 0;
       --tries) {
    StrEntry* sv = OldestTierMovableLocked();
    NsPtr nv = OldestPooledLeafLocked(nullptr);
    const bool take_ns =
        nv && (sv == nullptr || nv->stamp.load(std::memory_order_relaxed) < sv->stamp);
    if (take_ns) {
      if (TierMoveNamespaceLocked(nv, &lsn)) ++moved;
      EvictedFromPoolLocked(nv, nullptr);  // moved, or not movable: not offered again now
    } else if (sv != nullptr && TierMoveLocked(*sv, &lsn)) {
      ++moved;
    } else {
      break;
    }
  }
  return moved;
}

void Store::SetTierMinValue(uint64_t n) { tier_min_value_.store(n, std::memory_order_relaxed); }

Store::TierStats Store::tier_stats() const {
  TierStats s;
  base::MutexLock l(&ks_.mu);
  if (!tier_) return s;
  s.enabled = true;
  s.bytes = tier_->used_bytes();
  s.max_bytes = tier_->max_bytes();
  s.direct_io = tier_->direct();
  s.entries = tier_entries_;
  tier_counters_.Fill(&s);
  s.ring_reads = tier::ReadRing::total_reads();
  s.backlog_bytes = tier_backlog_.queued();
  return s;
}

namespace {
// Whether the entry's value may move, the tier itself aside (present, not paused).
bool EntryMovable(const StrEntry& e, uint64_t min_value) {
  // A block may move while its children are in RAM (a move drops nothing; the
  // tier drops leaves first): a chain growing past the budget spills its oldest part.
  return e.pins == 0 && !e.held && e.value != nullptr && !e.value->tiered() &&
         e.value->size >= min_value;
}
}  // namespace

bool Store::TierMovableLocked(const StrEntry& e) const {
  return tier_ && !tier_backlog_.Paused(MonotonicUs()) &&
         EntryMovable(e, tier_min_value_.load(std::memory_order_relaxed));
}

StrEntry* Store::OldestTierMovableLocked() {
  // The oldest of the shards' first movable entries (each RAM list is oldest
  // first). The tier's state is read once, not per entry: a read that cannot
  // promote walks every entry in RAM here.
  if (!tier_ || tier_backlog_.Paused(MonotonicUs())) return nullptr;
  const uint64_t min_value = tier_min_value_.load(std::memory_order_relaxed);
  StrEntry* oldest = nullptr;
  uint64_t oldest_stamp = 0;  // read under its shard's lock (a reader's touch writes it)
  for (Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    for (StrEntry* e = sh.lru_head; e != nullptr; e = e->next)
      if (EntryMovable(*e, min_value)) {
        if (oldest == nullptr || e->stamp < oldest_stamp) oldest = e, oldest_stamp = e->stamp;
        break;
      }
  }
  return oldest;
}

bool Store::TierDropOldestLocked(const StrEntry* keep, uint64_t* lsn) {
  // The older of the oldest string and the oldest namespace leaf on disk. A
  // value whose extent a snapshot holds is not a victim: dropping it would
  // free no space (docs/tier_format.md §3).
  NsPtr nv = OldestTieredNamespaceLocked();
  StrEntry* victim = nullptr;
  auto snapshot_held = [](const StrEntry& e) {
    return e.value != nullptr && e.value->extent != nullptr &&
           e.value->extent->snapshot_pins.load(std::memory_order_relaxed) > 0;
  };
  for (Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    for (StrEntry* e = sh.tier_head; e != nullptr; e = e->next)
      if (e != keep && !EvictionExempt(*e) && !snapshot_held(*e)) {
        if (victim == nullptr || e->stamp < victim->stamp) victim = e;
        break;
      }
  }
  if (nv && (victim == nullptr || nv->stamp.load(std::memory_order_relaxed) < victim->stamp)) {
    if (!RemoveLocked(nv, DropReason::kEviction, lsn).ok()) return false;
    EvictedFromPoolLocked(nv, nullptr);
    tier_counters_.Evicted();
    return true;
  }
  if (victim == nullptr) return false;
  if (!StrRemoveLocked(*victim, 1, lsn).ok()) return false;
  ++evicted_strings_;
  tier_counters_.Evicted();
  return true;
}

bool Store::TierMoveLocked(StrEntry& e, uint64_t* lsn) {
  TierApplyDoneLocked();
  if (!TierMovableLocked(e)) return false;
  const std::string_view key = *e.key;
  StrRef ram = e.value;
  if (tier::ExtentBytes(key.size(), ram->size) > tier_->max_bytes()) return false;
  tier::ExtentRef x = tier_->Allocate(key, ram->size);
  while (x == nullptr) {  // full: the tier drops its coldest values
    if (!TierDropOldestLocked(&e, lsn)) return false;
    x = tier_->Allocate(key, ram->size);
  }
  tier_backlog_.Add(ram->size);
  auto mv = std::make_shared<StrValue>();
  mv->data = ram->data;
  mv->size = ram->size;
  mv->edited = ram->edited;
  mv->quant = ram->quant;
  mv->extent = std::move(x);
  mv->backing = ram;
  StrRef moving = std::move(mv);
  const uint64_t freed = StrCharge(key, ram) - StrCharge(key, moving);
  {
    Shard& sh = ks_.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    sh.Unlink(e);
    e.tiered = true;
    sh.Link(e);
    e.value = moving;
  }
  ++tier_entries_;
  bytes_ -= freed;
  str_bytes_ -= freed;
  std::string k(key);
  if (!tier_io_->Post([this, k, ram, moving] { TierWrite(k, ram, moving); })) {
    {
      base::MutexLock tl(&tier_done_mu_);  // stopping: undone below
      tier_done_.push_back({std::move(k), ram, moving,
                            Status(Code::kIOError, Reason::kTierStopped, {}, "tier stopped")});
    }
    tier_backlog_.Done(ram->size);
  }
  return true;
}

void Store::TierWrite(std::string key, StrRef ram, StrRef moving) {
  Status st = tier_->Write(*moving->extent, ram->data, ram->size);
  const uint64_t size = ram->size;
  if (st.ok()) {
    tier_counters_.Wrote(moving->extent->length);
  } else {
    tier_counters_.Failed();
    tier_backlog_.PauseAfterFailure(MonotonicUs());
    LOG_WARNING("disk tier: writing %s at offset %llu failed: %s (the value stays in RAM)",
                tier_->path().c_str(), static_cast<unsigned long long>(moving->extent->offset),
                st.ToString().c_str());
  }
  {
    base::MutexLock tl(&tier_done_mu_);
    tier_done_.push_back({std::move(key), std::move(ram), std::move(moving), std::move(st)});
  }
  // The backlog drops only once the move is in tier_done_, so whoever sees it
  // empty and then takes ks_.mu applies every finished move (tests settle so).
  tier_backlog_.Done(size);
  if (ks_.mu.TryLock()) {
    TierApplyDoneLocked();
    ks_.mu.Unlock();
  }
}

void Store::TierApplyDoneLocked() {
  std::vector<TierDone> done;
  std::vector<TierNsDone> ns_done;
  {
    base::MutexLock tl(&tier_done_mu_);
    done.swap(tier_done_);
    ns_done.swap(tier_ns_done_);
  }
  if (!ns_done.empty()) TierApplyNsDoneLocked(ns_done);
  for (TierDone& d : done) {
    StrEntry* e = ks_.FindStringLocked(d.key);
    if (e == nullptr || e->value != d.moving) continue;  // replaced or gone since
    Shard& sh = ks_.ShardFor(d.key);
    if (d.status.ok()) {
      auto m = std::make_shared<StrValue>();
      m->data = const_cast<uint8_t*>(d.moving->extent->mapped());
      m->size = d.moving->size;
      m->edited = d.moving->edited;
      m->quant = d.moving->quant;
      m->extent = d.moving->extent;
      base::MutexLock sl(&sh.mu);
      e->value = std::move(m);  // the RAM bytes go with the last reader of `moving`
      continue;
    }
    // The write failed: the value stays in RAM (charged again; the budget is
    // met by the next write that needs room).
    const uint64_t back = StrCharge(d.key, d.ram) - StrCharge(d.key, d.moving);
    {
      base::MutexLock sl(&sh.mu);
      sh.Unlink(*e);
      e->tiered = false;
      sh.Link(*e);
      e->value = d.ram;
    }
    --tier_entries_;
    bytes_ += back;
    str_bytes_ += back;
    if (e->pins > 0)
      PinnedChargeChangedLocked(*e, StrCharge(d.key, d.moving), StrCharge(d.key, d.ram));
  }
}

Result<OwnedBuffer> Store::TierReadExtent(std::string_view what, const tier::Extent& x,
                                          size_t* at) {
  const uint64_t t0 = MonotonicUs();
  return TierReadCount(what, x, t0, tier_->Read(x, at));
}

Result<OwnedBuffer> Store::TierReadCount(std::string_view what, const tier::Extent& x,
                                         uint64_t t0_us, Result<OwnedBuffer> buf) {
  if (!buf.ok()) {
    tier_counters_.Failed();
    LOG_WARNING("disk tier: reading '%.*s' at %s offset %llu failed: %s",
                static_cast<int>(std::min<size_t>(what.size(), 128)), what.data(),
                x.file != nullptr ? x.file->path().c_str() : "?",
                static_cast<unsigned long long>(x.offset), buf.status().ToString().c_str());
    return buf.status();
  }
  tier_counters_.Read(x.length, MonotonicUs() - t0_us);
  return buf;
}

bool Store::TierReadOnRing(std::string what, const tier::ExtentRef& x,
                           std::function<void(Result<OwnedBuffer> buf, size_t at)>& done) {
  tier::ReadRing* ring = tier::ReadRing::Current();
  if (ring == nullptr || x == nullptr || x->length >= kTierRingReadMax) return false;
  const uint64_t t0 = MonotonicUs();
  tier::ReadRing::Done counted = [this, what = std::move(what), x, t0, done](
                                     Result<OwnedBuffer> buf, size_t at) {
    done(TierReadCount(what, *x, t0, std::move(buf)), at);
  };
  return ring->Read(x, counted);
}

namespace {
// A value on disk as read from its extent (the read's buffer at `at`).
Result<StrRef> ValueFromExtentRead(const StrRef& v, Result<OwnedBuffer> buf, size_t at) {
  if (!buf.ok()) return buf.status();
  const tier::Extent& x = *v->extent;
  auto fresh = StrValue::FromBuffer(std::move(*buf), at + x.header_bytes, x.value_len);
  if (fresh != nullptr) fresh->quant = v->quant;  // a quantized block stays one
  return StrRef(std::move(fresh));
}
}  // namespace

Result<StrRef> Store::TierReadCounted(std::string_view key, const StrRef& v) {
  size_t at = 0;
  auto buf = TierReadExtent(key, *v->extent, &at);
  return ValueFromExtentRead(v, std::move(buf), at);
}

Result<StrRef> Store::LoadTieredSync(std::string_view key, const StrRef& v) {
  auto r = TierReadCounted(key, v);
  if (r.ok() || r.status().code() != Code::kCorruption) return r;
  DropDamagedTiered(key, v);  // never a wrong byte: the entry goes, as the tier drops
  return StrRef();
}

void Store::ReadTiered(std::string key, StrRef v, std::function<void(Result<StrRef>)> done) {
  // On a worker: through its ring, the callback on the worker (no hand-off).
  std::function<void(Result<OwnedBuffer>, size_t)> on_ring = [v, done](Result<OwnedBuffer> buf,
                                                                       size_t at) {
    done(ValueFromExtentRead(v, std::move(buf), at));
  };
  if (TierReadOnRing(key, v->extent, on_ring)) return;
  auto job = [this, key, v, done]() { done(TierReadCounted(key, v)); };
  if (!tier_io_ || !tier_io_->Post(job))
    done(Status(Code::kBusy, Reason::kTierStopped, {}, "disk tier stopped"));
}

void Store::PromoteTiered(std::string_view key, const StrRef& v, const StrRef& fresh) {
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  TierApplyDoneLocked();
  StrEntry* e = ks_.FindStringLocked(key);
  if (e == nullptr || e->value != v) return;
  const uint64_t need = StrCharge(key, fresh) - StrCharge(key, v);
  if (cfg_.max_bytes > 0 && bytes_ + need > cfg_.max_bytes) {
    // Room by moving colder RAM values to the tier, never by dropping anything.
    while (bytes_ + need > cfg_.max_bytes) {
      StrEntry* colder = OldestTierMovableLocked();
      uint64_t lsn = 0;
      // Stamps read under their shards' locks (a reader's touch writes them).
      auto stamp_of = [this](const StrEntry& x) {
        base::MutexLock sl(&ks_.ShardFor(*x.key).mu);
        return x.stamp;
      };
      if (colder == nullptr || stamp_of(*colder) > stamp_of(*e) || !TierMoveLocked(*colder, &lsn))
        return;  // served from disk, not promoted
    }
  }
  {
    Shard& sh = ks_.ShardFor(key);
    base::MutexLock sl(&sh.mu);
    sh.Unlink(*e);
    e->tiered = false;
    sh.Link(*e);
    e->value = fresh;
  }
  --tier_entries_;
  bytes_ += need;
  str_bytes_ += need;
  if (e->pins > 0) PinnedChargeChangedLocked(*e, StrCharge(key, v), StrCharge(key, fresh));
  tier_counters_.Promoted();
}

void Store::DropDamagedTiered(std::string_view key, const StrRef& v) {
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  StrEntry* e = ks_.FindStringLocked(key);
  if (e == nullptr || e->value != v) return;
  uint64_t lsn = 0;
  if (!StrRemoveLocked(*e, 1, &lsn).ok()) return;
  ++evicted_strings_;
  tier_counters_.Evicted();
}

}  // namespace pion::store
