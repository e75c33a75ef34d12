// One namespace's snapshot view: its rows pinned as persistence's segments.
// Store::CaptureSnapshot (store/snapshot_capture.cc) takes every namespace's
// at its barrier; the module's value takes its own for an RDB save, an AOF
// rewrite, a digest or a copy.
#include <utility>
#include <vector>

#include "store/layer_rows.h"
#include "store/namespace.h"

namespace pion::store {

void CaptureNamespace(Namespace& n, const tier::ExtentRef& x, persist::SnapshotNamespace* v) {
  v->ns = n.name;
  v->kv_dim = n.dim;
  v->fmt = n.fmt;
  v->incarnation = n.incarnation;
  v->lru_stamp = n.stamp.load(std::memory_order_relaxed);
  if (n.parent) {
    v->parent = n.parent->name;
    v->parent_incarnation = n.parent->incarnation;
  }
  std::vector<FetchSegment> segments;
  for (int side = 0; side < 2; ++side) {
    const SideData& sd = n.sides[side];
    base::MutexLock l(&sd.mu);
    for (uint32_t li = 0; li < sd.layers.size(); ++li) {
      const Layer& L = sd.layers[li];
      if (L.rows == 0) continue;
      persist::SnapshotNamespace::Layer lv;
      lv.layer = li;
      lv.rows = L.rows;
      segments.clear();
      AppendSegments(&L, n.rows_per_chunk, n.row_bytes, 0, L.rows, &segments);
      lv.segments.reserve(segments.size());
      for (FetchSegment& s : segments) {
        if (s.chunk != nullptr) s.chunk->frozen = true;  // see Chunk::frozen
        // A chunk that still borrows the namespace's written extent: a
        // default-path snapshot references it (docs/snapshot_format.md §7).
        const bool in_tier = x != nullptr && s.chunk != nullptr &&
                             s.chunk->backing.get() == static_cast<const void*>(x.get());
        const uint64_t at = in_tier ? static_cast<uint64_t>(s.data - x->mapped()) : 0;
        lv.segments.push_back({std::move(s.chunk), s.data, s.rows, in_tier, at});
        if (in_tier && !v->in_tier) {
          v->in_tier = true;
          v->tier = {x->offset, x->length, x->header_bytes, x->value_crc, x->seq};
          v->tier_value_len = x->value_len;
          v->tier_pin = tier::PinForSnapshot(x);
        }
      }
      v->layers[side].push_back(std::move(lv));
    }
  }
}

}  // namespace pion::store
