// The Slice primitives that need a namespace's definition (store/slice.h).
#include "store/slice.h"

#include <utility>

#include "store/namespace.h"

namespace pion::store {

void Slice::ChargeLocked(Namespace* n, uint64_t delta) const {
  st_->ks_.mu.AssertHeld();
  st_->bytes_ += delta;
  if (n != nullptr) n->bytes += delta;
}

void Slice::ReportTableStoredLocked(const BlockTable& t, const Namespace* parent) const {
  st_->ks_.mu.AssertHeld();
  if (st_->block_observer_ && !t.hashes.empty())
    st_->block_observer_->OnBlocksStored(t, Store::LastHash(parent));
}

void Slice::InsertLocked(NsPtr n) const {
  st_->ks_.mu.AssertHeld();
  Shard& sh = st_->ks_.ShardFor(n->name);
  base::MutexLock sl(&sh.mu);
  sh.map.emplace(n->name, std::move(n));
}

}  // namespace pion::store
