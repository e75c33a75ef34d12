// Snapshot capture: the barrier (every mutation blocked, every reserved
// change applied), the string keys, and every namespace's pinned view
// (CaptureNamespace, store/ns_capture.cc). See store.h.
#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

void Store::BeginPending() {
  base::MutexLock l(&pending_mu_);
  ++pending_;
}

void Store::EndPending() {
  base::MutexLock l(&pending_mu_);
  if (--pending_ == 0) pending_cv_.SignalAll();
}

std::vector<persist::SnapshotNamespace> Store::CaptureSnapshot(
    const std::function<Status()>& at_barrier, Status* barrier_status) {
  base::WriterLock gate(&gate_);
  {
    // Changes reserved before the barrier are in the log before it; wait for
    // them to be written and applied (new ones cannot start: they need the gate).
    base::MutexLock l(&pending_mu_);
    while (pending_ != 0) pending_cv_.Wait(pending_mu_);
  }
  *barrier_status = at_barrier ? at_barrier() : Status::OK();
  std::vector<persist::SnapshotNamespace> views;
  if (!barrier_status->ok()) return views;
  std::vector<NsPtr> all;
  std::vector<tier::ExtentRef> extents;  // [i]: all[i]'s extent in the disk tier, or null
  {
    base::MutexLock l(&ks_.mu);
    captured_strings_.clear();
    captured_strings_.reserve(StrCountLocked());
    for (const Shard& sh : ks_.shards()) {
      base::MutexLock sl(&sh.mu);                               // readers touch stamps under it
      for (const StrEntry* head : {sh.lru_head, sh.tier_head})  // RAM, then disk tier
        for (const StrEntry* e = head; e != nullptr; e = e->next) {
          captured_strings_.push_back(
              {*e->key, e->expire_at_ms, e->stamp, e->value, e->value->data, e->value->size});
          if (e->block) {  // a block's links and metadata (a BLOCK section)
            persist::SnapshotString& c = captured_strings_.back();
            c.is_block = true;
            c.has_parent = e->block->parent != nullptr;
            if (c.has_parent) c.parent = *e->block->parent->key;
            c.has_hash = e->block->has_hash;
            c.hash = e->block->hash;
            c.tokens = e->block->tokens;
          }
          if (e->value->quantized())  // a quantized block's format (a QUANT section)
            captured_strings_.back().quant = QuantRecordOf(e->value->quant);
          const tier::ExtentRef& x = e->value->extent;
          if (e->value->on_disk() && x->written.load(std::memory_order_acquire)) {
            // Written to the tier: a default-path snapshot references the extent.
            persist::SnapshotString& c = captured_strings_.back();
            c.in_tier = true;
            c.tier = {x->offset, x->length, x->header_bytes, x->value_crc, x->seq};
            c.tier_pin = tier::PinForSnapshot(x);
          }
        }
    }
    // Oldest first over all shards (each shard's list is in its own order).
    std::stable_sort(captured_strings_.begin(), captured_strings_.end(),
                     [](const persist::SnapshotString& a, const persist::SnapshotString& b) {
                       return a.lru_stamp < b.lru_stamp;
                     });
    all.reserve(NsCountLocked());
    for (const Shard& sh : ks_.shards())
      for (auto& [name, n] : ks_.MapOf(sh)) all.push_back(n);
    views.resize(all.size());
    extents.resize(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      views[i].blocks = all[i]->blocks;
      // The extent the namespace's chunks may borrow (written: its chunks are
      // installed only then); a chunk that borrows it is referenced below.
      const tier::ExtentRef& x = all[i]->mapped_extent;
      if (x != nullptr && x->written.load(std::memory_order_acquire)) extents[i] = x;
    }
  }
  for (size_t i = 0; i < all.size(); ++i) CaptureNamespace(*all[i], extents[i], &views[i]);
  // Parents before their children (a loader links a child to a namespace it
  // has already read: by depth), and oldest first at each depth. The loader
  // restores the saved stamps themselves at the end.
  std::vector<size_t> order(views.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (all[a]->depth != all[b]->depth) return all[a]->depth < all[b]->depth;
    return views[a].lru_stamp < views[b].lru_stamp;
  });
  std::vector<persist::SnapshotNamespace> sorted;
  sorted.reserve(views.size());
  for (size_t i : order) sorted.push_back(std::move(views[i]));
  return sorted;
}

}  // namespace pion::store
