// What a namespace answers about itself: a lookup's hit, its block table, its
// lineage for KV.PREFIX.INFO and the tallies of its rows. The store finds the
// namespace (and touches its LRU) and adds what only it knows (children, the
// disk tier); the module's value answers from these alone.
#include "store/namespace.h"

namespace pion::store {

namespace {

// The K side's layer-0 rows, under its lock.
uint64_t PrefixTokens(const Namespace& n) {
  const SideData& k = n.side(Side::kKeys);
  base::MutexLock l(&k.mu);
  return k.layers.empty() ? 0 : k.layers[0].rows;
}

}  // namespace

void DescribeChain(const Namespace& n, NamespaceInfo* out) {
  out->parent = n.parent ? n.parent->name : std::string();
  out->depth = n.depth;
  out->chain_length = n.depth + 1;
  out->chain_tokens = 0;
  for (const Namespace* p = &n; p != nullptr; p = p->parent.get()) {
    const uint64_t t = PrefixTokens(*p);
    if (p == &n) out->tokens = t;
    out->chain_tokens += t;
  }
}

RowTally TallyRows(const Namespace& n) {
  RowTally t;
  for (int side = 0; side < 2; ++side) {
    const SideData& sd = n.sides[side];
    base::MutexLock l(&sd.mu);
    t.rows += sd.total_rows;
    for (const Layer& L : sd.layers)
      for (const auto& c : L.chunks)
        if (c) t.chunk_bytes += c->bytes();
    if (side == 0 && !sd.layers.empty()) t.prefix_tokens += sd.layers[0].rows;
  }
  return t;
}

}  // namespace pion::store
