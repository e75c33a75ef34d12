// The prefix reads and DROP (store/prefix_ops.h): LOOKUP, the lineage chain,
// KV.PREFIX.INFO ns, BLOCKS / MEMBERSHIP and KV.PREFIX.DROP.
//
// LOOKUP, BLOCKS and MEMBERSHIP take only the name's shard lock, never a side
// lock under it (a store holds side -> ks.mu -> shard): the key side's layer-0
// row count is an atomic mirror (LookupOf), and a block table is read in place
// or by reference.
#include "store/prefix_ops.h"

#include <utility>

#include "base/mutex.h"
#include "store/namespace.h"

namespace pion::store {

LookupResult OpLookup(const OpArgs& op, std::string_view ns) {
  LookupResult res;
  const Slice& s = op.slice;
  const Shard& sh = s.ks.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  auto it = sh.map.find(ns);
  if (it == sh.map.end()) return res;
  res = LookupOf(*it->second);
  s.Touch(*it->second);
  return res;
}

std::vector<ChainSegment> OpLookupChain(const OpArgs& op, std::string_view ns) {
  std::vector<ChainSegment> chain;
  const Slice& s = op.slice;
  NsPtr n = s.FindAndTouch(ns);
  if (!n) return chain;
  chain.resize(n->depth + 1);
  size_t i = chain.size();
  for (Namespace* p = n.get(); p != nullptr; p = p->parent.get()) {
    ChainSegment& seg = chain[--i];
    seg.ns = p->name;
    {
      const Shard& sh = s.ks.ShardFor(p->name);
      base::MutexLock l(&sh.mu);
      seg.prefill_us = p->prefill_us;
    }
    const SideData& k = p->sides[static_cast<int>(Side::kKeys)];
    base::MutexLock l(&k.mu);
    seg.tokens = k.layers.empty() ? 0 : k.layers[0].rows;
  }
  return chain;
}

bool OpDescribe(const OpArgs& op, std::string_view ns, NamespaceInfo* out) {
  const Slice& s = op.slice;
  NsPtr n;
  {
    base::MutexLock l(&s.ks.mu);
    const NsPtr* it = s.NamespaceRefLocked(ns);
    if (it == nullptr) return false;
    n = *it;
    out->children = n->children.size();
    out->on_disk = n->tiered;
  }
  DescribeChain(*n, out);
  return true;
}

std::shared_ptr<const BlockTable> OpBlocks(const OpArgs& op, std::string_view ns) {
  const Shard& sh = op.slice.ks.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  const auto* t = op.slice.BlocksLocked(sh, ns);
  return t ? *t : nullptr;
}

bool OpWithBlocks(const OpArgs& op, std::string_view ns,
                  const std::function<void(const BlockTable&)>& fn) {
  const Shard& sh = op.slice.ks.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  const auto* t = op.slice.BlocksLocked(sh, ns);
  if (t == nullptr) return false;
  fn(**t);
  return true;
}

Result<uint64_t> OpDrop(const OpArgs& op, std::span<const std::string_view> names,
                        const std::function<bool(std::string_view ns)>& may_drop) {
  *op.lsn = 0;
  const Slice& s = op.slice;
  base::ReaderLock gate(&s.gate());
  base::MutexLock l(&s.ks.mu);
  if (may_drop) {
    // Every namespace of every subtree, before the first removal.
    std::vector<const Namespace*> todo;
    for (std::string_view name : names)
      if (const Namespace* n = s.NamespaceLocked(name)) todo.push_back(n);
    if (Status st = Slice::AskSubtrees(std::move(todo), may_drop); !st.ok()) return st;
  }
  uint64_t dropped = 0;
  for (std::string_view name : names) {
    const NsPtr* it = s.NamespaceRefLocked(name);
    if (it == nullptr) continue;
    NsPtr n = *it;
    PION_RETURN_IF_ERROR(s.DropNamespaceLocked(n, op.lsn, &dropped));
  }
  return dropped;
}

}  // namespace pion::store
