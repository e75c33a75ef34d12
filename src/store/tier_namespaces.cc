// Namespaces in the disk tier (store.h "Disk tier", docs/tier_format.md).
//
// A namespace the budget pushes out of RAM (its stored bytes at least
// tier-min-value, every child already on disk, no store or child
// registration in flight) moves whole: both sides, every layer, in one
// extent whose value is its chunks one after the other, each at a 64-byte
// aligned offset. Its rows stop being charged to the budget at once; an I/O
// thread writes the extent from the chunks (held by reference, so nobody
// writes them in place meanwhile), and when the write is done each chunk that
// is still the layer's is replaced by one that borrows the tier's read-only
// mapping (Chunk::Borrow, frozen). Every read path sees chunks as before; a
// write copies a frozen chunk first, as for a mapped snapshot. The block
// table and lineage stay in RAM (they are what MEMBERSHIP and LOOKUP read).
#include <algorithm>
#include <cstring>
#include <mutex>

#include "base/clock.h"
#include "base/log.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

namespace {
uint64_t Align64(uint64_t n) { return (n + 63) & ~uint64_t{63}; }
}  // namespace

bool Store::RamCandidateLocked(const Namespace& n) const {
  if (n.tiered || n.pending_children != 0) return false;
  // (Moving is also paused after a failed write: TierMoveNamespaceLocked says no.)
  for (const Namespace* c : n.children)
    if (!c->tiered) return false;
  return true;
}

void Store::UntierNamespaceLocked(Namespace& n) {
  if (!n.tiered) return;
  bytes_ += n.tier_uncharged;
  tier_uncharged_ -= n.tier_uncharged;
  n.tier_uncharged = 0;
  n.tiered = false;
  n.tier_extent.reset();  // the chunks that borrow it keep it alive
  --tier_entries_;
}

std::shared_ptr<Namespace> Store::OldestTieredNamespaceLocked() const {
  // Not one whose extent a snapshot holds: dropping it would free no space
  // (docs/tier_format.md §3), as for strings (TierDropOldestLocked).
  auto snapshot_held = [](const Namespace& n) {
    return n.tier_extent != nullptr &&
           n.tier_extent->snapshot_pins.load(std::memory_order_relaxed) > 0;
  };
  std::shared_ptr<Namespace> best;
  for (const Shard& sh : ks_.shards())
    for (const auto& [name, n] : ks_.MapOf(sh))
      if (n->tiered && n->children.empty() && n->pending_children == 0 && !snapshot_held(*n) &&
          (!best ||
           n->stamp.load(std::memory_order_relaxed) < best->stamp.load(std::memory_order_relaxed)))
        best = n;
  return best;
}

bool Store::TierMoveNamespaceLocked(const std::shared_ptr<Namespace>& n, uint64_t* lsn) {
  TierApplyDoneLocked();
  if (!tier_ || n->dropped || !RamCandidateLocked(*n) || tier_backlog_.Paused(MonotonicUs()))
    return false;
  const uint64_t rows_bytes = n->bytes - TableBytes(n->blocks);
  if (rows_bytes == 0 || rows_bytes < tier_min_value_.load(std::memory_order_relaxed)) return false;
  TierNsDone job;
  uint64_t total = 0;
  for (uint8_t side = 0; side < 2; ++side) {
    // The lock order is side -> ks_.mu: under ks_.mu a side lock is only tried (a
    // namespace being written is not moved now).
    const SideData& sd = n->sides[side];
    if (!sd.mu.TryLock()) return false;
    if (sd.reserved_total != sd.total_rows) {
      sd.mu.Unlock();
      return false;
    }
    for (uint32_t li = 0; li < sd.layers.size(); ++li)
      for (uint64_t ci = 0; ci < sd.layers[li].chunks.size(); ++ci)
        if (const std::shared_ptr<Chunk>& c = sd.layers[li].chunks[ci]) {
          job.chunks.push_back({side, li, ci, c, total});
          total += Align64(c->bytes());
        }
    sd.mu.Unlock();
  }
  if (total == 0 || tier::ExtentBytes(n->name.size(), total) > tier_->max_bytes()) return false;
  tier::ExtentRef x = tier_->Allocate(n->name, total);
  while (x == nullptr) {  // full: the tier drops its coldest entries
    if (!TierDropOldestLocked(nullptr, lsn)) return false;
    if (n->dropped) return false;
    x = tier_->Allocate(n->name, total);
  }
  tier_backlog_.Add(total);
  n->tiered = true;
  n->tier_extent = x;
  n->tier_uncharged = rows_bytes;
  tier_uncharged_ += rows_bytes;
  bytes_ -= rows_bytes;
  ++tier_entries_;
  job.ns = n;
  job.extent = std::move(x);
  const uint64_t bytes = total;
  auto shared = std::make_shared<TierNsDone>(std::move(job));
  if (!tier_io_->Post([this, shared] { TierNamespaceWrite(std::move(*shared)); })) {
    shared->status = Status(Code::kIOError, Reason::kTierStopped, {}, "tier stopped");
    {
      base::MutexLock tl(&tier_done_mu_);
      tier_ns_done_.push_back(std::move(*shared));
    }
    tier_backlog_.Done(bytes);
  }
  return true;
}

void Store::TierNamespaceWrite(TierNsDone job) {
  const tier::Extent& x = *job.extent;
  const std::vector<TierChunk>& cs = job.chunks;
  // The value's bytes [off, off + len): the chunks' bytes, zeros between them.
  auto fill = [&cs](uint64_t off, uint8_t* dst, uint64_t len) {
    auto it = std::upper_bound(cs.begin(), cs.end(), off,
                               [](uint64_t o, const TierChunk& c) { return o < c.offset; });
    size_t i = it == cs.begin() ? 0 : static_cast<size_t>(it - cs.begin()) - 1;
    uint64_t done = 0;
    while (done < len) {
      const uint64_t at = off + done;
      const TierChunk* c = i < cs.size() ? &cs[i] : nullptr;
      if (c != nullptr && at >= c->offset + c->chunk->bytes()) {
        ++i;
        const uint64_t next = i < cs.size() ? cs[i].offset : off + len;
        const uint64_t gap = std::min(next, off + len) - at;
        std::memset(dst + done, 0, gap);
        done += gap;
        continue;
      }
      if (c == nullptr || at < c->offset) {  // before the first chunk (never) or padding
        const uint64_t gap = std::min(c != nullptr ? c->offset : off + len, off + len) - at;
        std::memset(dst + done, 0, gap);
        done += gap;
        continue;
      }
      const uint64_t in = at - c->offset;
      const uint64_t take = std::min(c->chunk->bytes() - in, len - done);
      std::memcpy(dst + done, c->chunk->data + in, take);
      done += take;
    }
  };
  job.status = tier_->Write(*job.extent, fill);
  const uint64_t queued = x.value_len;
  if (job.status.ok()) {
    tier_counters_.Wrote(x.length);
  } else {
    tier_counters_.Failed();
    tier_backlog_.PauseAfterFailure(MonotonicUs());
    LOG_WARNING(
        "disk tier: writing namespace '%s' to %s at offset %llu failed: %s (it stays in "
        "RAM)",
        job.ns->name.c_str(), tier_->path().c_str(), static_cast<unsigned long long>(x.offset),
        job.status.ToString().c_str());
  }
  {
    base::MutexLock tl(&tier_done_mu_);
    tier_ns_done_.push_back(std::move(job));
  }
  tier_backlog_.Done(queued);  // after the push, as TierWrite does
  if (ks_.mu.TryLock()) {
    TierApplyDoneLocked();
    ks_.mu.Unlock();
  }
}

void Store::TierApplyNsDoneLocked(std::vector<TierNsDone>& done) {
  std::vector<TierNsDone> later;  // a side lock was busy: the next holder of ks_.mu retries
  for (TierNsDone& d : done) {
    Namespace& n = *d.ns;
    if (n.dropped || !n.tiered || n.tier_extent != d.extent) continue;  // changed since
    if (!d.status.ok()) {
      UntierNamespaceLocked(n);
      continue;
    }
    const uint8_t* base = d.extent->mapped();
    if (!TryLockSides(n)) {
      later.push_back(std::move(d));
      continue;
    }
    for (const TierChunk& c : d.chunks) {
      SideData& sd = n.sides[c.side];
      sd.mu.AssertHeld();  // TryLockSides
      if (c.layer >= sd.layers.size() || c.index >= sd.layers[c.layer].chunks.size()) continue;
      std::shared_ptr<Chunk>& slot = sd.layers[c.layer].chunks[c.index];
      if (slot != c.chunk) continue;  // rewritten since: the new chunk stays
      slot = Chunk::Borrow(base + c.offset, c.chunk->capacity_rows, c.chunk->row_bytes, d.extent);
    }
    n.mapped_extent = d.extent;
    n.maps_tier.store(true, std::memory_order_release);
    UnlockSides(n);
  }
  if (!later.empty()) {
    base::MutexLock tl(&tier_done_mu_);
    for (TierNsDone& d : later) tier_ns_done_.push_back(std::move(d));
  }
}

tier::ExtentRef Store::namespace_extent_for_test(std::string_view ns) {
  NsPtr n = Find(ns);
  base::MutexLock l(&ks_.mu);
  TierApplyDoneLocked();
  return n ? n->mapped_extent : nullptr;
}

bool Store::TierRoomLocked(uint64_t need, const Namespace* keep, uint64_t stamp) {
  // Room by moving colder RAM entries to the tier, never by dropping anything
  // (the tier itself may drop its oldest to take them, as any move does).
  while (cfg_.max_bytes > 0 && bytes_ + need > cfg_.max_bytes) {
    StrEntry* sv = OldestTierMovableLocked();
    NsPtr nv = OldestPooledLeafLocked(keep);
    if (nv && nv->stamp.load(std::memory_order_relaxed) >= stamp) nv.reset();
    if (sv != nullptr && sv->stamp >= stamp) sv = nullptr;
    if (nv && sv != nullptr) {
      if (sv->stamp < nv->stamp.load(std::memory_order_relaxed))
        nv.reset();
      else
        sv = nullptr;
    }
    uint64_t lsn = 0;  // what a drop from the tier logged: an eviction, never waited for
    if (nv) {
      if (!TierMoveNamespaceLocked(nv, &lsn)) return false;
      EvictedFromPoolLocked(nv, keep);
    } else if (sv == nullptr || !TierMoveLocked(*sv, &lsn)) {
      return false;
    }
  }
  return true;
}

namespace {
// The namespace whose extent this thread's caller has just checked (TierCheckedScope).
thread_local const Namespace* t_tier_checked = nullptr;
}  // namespace

Store::TierCheckedScope::TierCheckedScope(const Namespace* n) : prev_(t_tier_checked) {
  t_tier_checked = n;
}
Store::TierCheckedScope::~TierCheckedScope() { t_tier_checked = prev_; }

bool Store::NeedsTierCheck(const Namespace& n) {
  return n.maps_tier.load(std::memory_order_acquire) && t_tier_checked != &n;
}

std::optional<Store::TierCheck> Store::TierCheckFor(std::string_view sid) {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side)) return std::nullopt;
  NsPtr n = Find(ns);
  if (!n || !n->maps_tier.load(std::memory_order_acquire) || tier_ == nullptr) return std::nullopt;
  base::MutexLock l(&ks_.mu);
  TierApplyDoneLocked();
  if (n->mapped_extent == nullptr) return std::nullopt;
  return TierCheck{n, n->mapped_extent};
}

void Store::ReadTierCheck(const TierCheck& c,
                          std::function<void(Result<OwnedBuffer> buf, size_t at)> done) {
  if (TierReadOnRing(c.ns->name, c.extent, done)) return;  // a worker's own ring
  auto job = [this, c, done]() {
    size_t at = 0;
    auto buf = TierReadExtent(c.ns->name, *c.extent, &at);
    done(std::move(buf), at);
  };
  if (!tier_io_ || !tier_io_->Post(job))
    done(Status(Code::kBusy, Reason::kTierStopped, {}, "disk tier stopped"), 0);
}

Status Store::CheckTieredNamespace(const NsPtr& n) {
  TierCheck c{n, nullptr};
  {
    base::MutexLock l(&ks_.mu);
    TierApplyDoneLocked();
    c.extent = n->mapped_extent;
  }
  if (c.extent == nullptr || tier_ == nullptr) return Status::OK();  // promoted meanwhile
  size_t at = 0;
  auto buf = TierReadExtent(n->name, *c.extent, &at);
  return ApplyTierCheck(c, std::move(buf), at);
}

Status Store::ApplyTierCheck(const TierCheck& c, Result<OwnedBuffer> buf, size_t at) {
  const NsPtr& n = c.ns;
  const tier::ExtentRef& x = c.extent;
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  TierApplyDoneLocked();
  if (n->dropped || n->mapped_extent != x) return Status::OK();  // changed since: as it is now
  if (!buf.ok()) {
    if (buf.status().code() != Code::kCorruption) return buf.status();
    // Never a wrong byte: the namespace goes, as the tier drops entries.
    uint64_t lsn = 0;
    uint64_t removed = 0;
    PION_RETURN_IF_ERROR(RemoveSubtreeLocked(n, DropReason::kEviction, &lsn, &removed));
    EvictedFromPoolLocked(n, nullptr);
    tier_counters_.Evicted(removed);
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  }
  // Checked. Promoted when it fits (the read's buffer becomes its chunks'
  // backing), else served from the mapping just checked.
  const uint64_t need = n->tiered ? n->tier_uncharged : 0;
  if (need > 0 && !TierRoomLocked(need, n.get(), n->stamp.load(std::memory_order_relaxed)))
    return Status::OK();
  if (n->dropped || n->mapped_extent != x) return Status::OK();  // the moves applied a newer one
  if (!TryLockSides(*n)) return Status::OK();                    // being written: not now
  auto holder = std::make_shared<OwnedBuffer>(std::move(*buf));
  const uint8_t* base = static_cast<const uint8_t*>(holder->data()) + at + x->header_bytes;
  const uint8_t* mapped = x->mapped();
  for (SideData& sd : n->sides) {
    sd.mu.AssertHeld();  // TryLockSides
    for (Layer& layer : sd.layers)
      for (std::shared_ptr<Chunk>& ch : layer.chunks)
        if (ch != nullptr && ch->backing.get() == static_cast<const void*>(x.get()))
          ch = Chunk::Borrow(base + (ch->data - mapped), ch->capacity_rows, ch->row_bytes, holder);
  }
  n->mapped_extent.reset();
  n->maps_tier.store(false, std::memory_order_release);
  if (n->tiered) {
    UntierNamespaceLocked(*n);
    tier_counters_.Promoted();
  }
  UnlockSides(*n);
  return Status::OK();
}

}  // namespace pion::store
