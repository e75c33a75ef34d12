// The recovery API: logged changes applied before serving (WAL replay,
// snapshot load), with nothing logged. See store.h.
#include <algorithm>
#include <mutex>

#include "base/check.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

Status Store::ApplyRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                            quant::Format fmt, const persist::BlockRecord* blocks,
                            std::string_view parent_ns, uint64_t parent_incarnation) {
  if (ns.empty() || ns.size() > kMaxNamespaceBytes || kv_dim < 1 || kv_dim > quant::kMaxDim ||
      !quant::DimSupported(fmt, kv_dim))
    return Status::Corruption("register record with invalid namespace, kv_dim or format");
  if (parent_ns.size() > kMaxNamespaceBytes || parent_ns == ns)
    return Status::Corruption("register record with an invalid parent");
  std::shared_ptr<const BlockTable> table;
  if (blocks) table = BlockTable::Finished(*blocks);
  base::MutexLock l(&ks_.mu);
  next_incarnation_ = std::max(next_incarnation_, incarnation + 1);
  // Replay never refuses what was logged; it evicts as the live server did
  // (a smaller --maxmemory than before the restart evicts more).
  auto fit_bytes = [&](const Namespace* keep, uint64_t add) REQUIRES(ks_.mu) {
    if (cfg_.max_bytes == 0) return;
    uint64_t unused = 0;
    (void)EvictLocked(
        keep, [&]() REQUIRES(ks_.mu) { return bytes_ + add <= cfg_.max_bytes; }, &unused);
  };
  // A re-registration of the same incarnation keeps its link (fixed at
  // creation). A new namespace links to its parent of the logged incarnation,
  // which must be present: one that is not (evicted while loading under a
  // smaller budget, or dropped in the race Register describes) means the child
  // is gone too, so the record is skipped (and the child's rows then are
  // skipped as those of an absent namespace).
  NsPtr parent;
  const NsPtr* it = NsRefLocked(ns);
  const bool same = it != nullptr && (*it)->incarnation == incarnation;
  if (!parent_ns.empty() && !same) {
    const NsPtr* pit = NsRefLocked(parent_ns);
    if (pit == nullptr || (*pit)->incarnation != parent_incarnation || (*pit)->dim != kv_dim)
      return Status::OK();
    parent = *pit;
  }
  if (it != nullptr) {
    NsPtr n = *it;
    if (same && n->dim == kv_dim && n->fmt == fmt) {
      if (table) {
        uint64_t old = TableBytes(n->blocks), add = TableBytes(table);
        n->bytes -= old;
        bytes_ -= old;
        fit_bytes(n.get(), add);
        n->bytes += add;
        bytes_ += add;
        Shard& sh = ks_.ShardFor(n->name);
        base::MutexLock sl(&sh.mu);
        n->blocks = std::move(table);
      }
      Touch(*n);
      return Status::OK();
    }
    // A new incarnation: the old one goes with its subtree. No cycle can
    // form: were the parent a descendant of the old one, it is gone now too.
    uint64_t unused = 0, removed = 0;
    PION_RETURN_IF_ERROR(RemoveSubtreeLocked(n, DropReason::kDrop, &unused, &removed));
    if (parent && parent->dropped) return Status::OK();
  }
  // No max_chain check: replay reproduces what was accepted.
  uint64_t unused = 0;
  PION_RETURN_IF_ERROR(EvictNamespacesLocked(
      parent.get(),
      [&]() REQUIRES(ks_.mu) {
        return 2 * (NsCountLocked() + 1) <= std::max<uint64_t>(cfg_.max_sessions, 2);
      },
      &unused));
  fit_bytes(parent.get(), TableBytes(table));
  auto n = std::make_shared<Namespace>(std::string(ns), incarnation, kv_dim, fmt, parent);
  n->blocks = std::move(table);
  n->bytes = TableBytes(n->blocks);
  bytes_ += n->bytes;
  if (parent) parent->children.push_back(n.get());
  Touch(*n);
  Shard& sh = ks_.ShardFor(n->name);
  base::MutexLock sl(&sh.mu);
  sh.map.emplace(n->name, std::move(n));
  return Status::OK();
}

Status Store::ApplyStored(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                          uint64_t start, uint64_t count, std::span<const uint8_t> stored,
                          const std::shared_ptr<const void>* backing) {
  NsPtr n = Find(ns);
  if (!n || n->incarnation != incarnation)
    return Status(Code::kNotFound, Reason::kReplayNamespaceAbsent, {}, "namespace not present");
  PION_RETURN_IF_ERROR(CheckStoredArgs(*n, layer, start, count, stored.size()));
  Touch(*n);
  uint64_t unused = 0;
  return StoreEncoded(n, side, layer, start, count, stored, false, &unused, backing);
}

void Store::ApplyDrop(std::string_view ns, uint64_t incarnation) {
  base::MutexLock l(&ks_.mu);
  const NsPtr* it = NsRefLocked(ns);
  if (it == nullptr || (*it)->incarnation != incarnation) return;
  NsPtr n = *it;
  uint64_t unused = 0, removed = 0;
  Status st = RemoveSubtreeLocked(n, DropReason::kDrop, &unused, &removed);
  PION_CHECK(st.ok());
}

void Store::ApplyFlushAll() {
  base::MutexLock l(&ks_.mu);
  ClearAllLocked();
}

void Store::SetLruStamp(std::string_view ns, uint64_t stamp) {
  NsPtr n = Find(ns);
  if (!n) return;
  n->stamp.store(stamp, std::memory_order_relaxed);
  ks_.RaiseClockAbove(stamp);
}

}  // namespace pion::store
