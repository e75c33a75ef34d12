// Chunked rows: see layer_rows.h and store/chunk.h.
#include "store/layer_rows.h"

#include <algorithm>
#include <cstring>

namespace pion::store {

// REQUIRES sd.mu. Copies stored rows into the layer's chunks (copy on write).
void ApplyRowsLocked(Namespace& n, SideData& sd, uint32_t layer, uint64_t start, uint64_t count,
                     std::span<const uint8_t> stored, const std::shared_ptr<const void>* backing) {
  const uint64_t end = start + count;
  if (sd.layers.size() <= layer) sd.layers.resize(layer + 1);
  Layer& L = sd.layers[layer];
  const uint64_t old_rows = L.rows;
  const uint64_t new_rows = std::max(old_rows, end);
  const uint32_t R = n.rows_per_chunk;
  const size_t rb = n.row_bytes;
  uint64_t r = start;
  while (r < end) {
    uint64_t ci = r / R;
    uint32_t off = static_cast<uint32_t>(r % R);
    uint32_t run = static_cast<uint32_t>(std::min<uint64_t>(R - off, end - r));
    if (L.chunks.size() <= ci) L.chunks.resize(ci + 1);
    std::shared_ptr<Chunk>& c = L.chunks[ci];
    uint32_t need = off + run;
    const uint8_t* src = stored.data() + (r - start) * rb;
    // A mapped snapshot's rows: the chunk by reference, frozen (copied on write),
    // when it gets the capacity a copy would (a fetch reads a chunk's rows up to
    // its capacity, so a shorter one would read differently past the last row).
    if (!c && backing != nullptr && *backing != nullptr && off == 0 &&
        GrowCapacity(0, run, R) == run && reinterpret_cast<uintptr_t>(src) % kChunkAlign == 0) {
      c = Chunk::Borrow(src, run, rb, *backing);
      r += run;
      continue;
    }
    if (!c) {
      // A fresh chunk: zero only the bytes this write does not cover.
      c = Chunk::MakeUninit(GrowCapacity(0, need, R), rb);
      const size_t lo = static_cast<size_t>(off) * rb, hi = lo + static_cast<size_t>(run) * rb;
      std::memset(c->data, 0, lo);
      std::memset(c->data + hi, 0, Chunk::AllocBytes(c->capacity_rows, rb) - hi);
    } else if (c->capacity_rows < need) {
      c = c->Clone(GrowCapacity(c->capacity_rows, need, R));
    } else if (c->frozen || c.use_count() > 1) {  // pinned, or a snapshot's: copy on write
      c = c->Clone(c->capacity_rows);
    }
    std::memcpy(c->data + static_cast<size_t>(off) * rb, src, static_cast<size_t>(run) * rb);
    r += run;
  }
  sd.total_rows += new_rows - old_rows;
  L.rows = new_rows;
  if (layer == 0) sd.layer0_rows.store(new_rows, std::memory_order_relaxed);
}

// REQUIRES sd.mu. Makes `c` (full capacity, every byte written, not yet seen
// by anyone) chunk `ci` of the layer.
void InstallChunkLocked(Namespace& n, SideData& sd, uint32_t layer, uint64_t ci,
                        std::shared_ptr<Chunk> c) {
  const uint32_t R = n.rows_per_chunk;
  PION_CHECK(c != nullptr && c->capacity_rows == R && c->row_bytes == n.row_bytes);
  if (sd.layers.size() <= layer) sd.layers.resize(layer + 1);
  Layer& L = sd.layers[layer];
  if (L.chunks.size() <= ci) L.chunks.resize(ci + 1);
  // The chunk it replaces stays alive, unchanged, for whoever still holds it
  // (a fetch in flight, a snapshot): copy on write without the copy.
  L.chunks[ci] = std::move(c);
  const uint64_t end = (ci + 1) * R;
  if (end > L.rows) {
    sd.total_rows += end - L.rows;
    L.rows = end;
    if (layer == 0) sd.layer0_rows.store(end, std::memory_order_relaxed);
  }
}

// Appends segments covering rows [start, end) of `L` (may be null) to `out`.
void AppendSegments(const Layer* L, uint32_t R, size_t rb, uint64_t start, uint64_t end,
                    std::vector<FetchSegment>* out) {
  auto zeros = [&](uint64_t rows) {
    if (rows == 0) return;
    if (!out->empty() && out->back().data == nullptr) {
      out->back().rows += rows;
    } else {
      out->push_back(FetchSegment{nullptr, nullptr, rows});
    }
  };
  uint64_t r = start;
  while (r < end) {
    if (L == nullptr || r >= L->rows) {
      zeros(end - r);
      return;
    }
    uint64_t ci = r / R;
    uint32_t off = static_cast<uint32_t>(r % R);
    uint64_t run = std::min<uint64_t>(R - off, end - r);
    const std::shared_ptr<Chunk>* c = ci < L->chunks.size() ? &L->chunks[ci] : nullptr;
    uint64_t avail = 0;
    if (c && *c && (*c)->capacity_rows > off)
      avail = std::min<uint64_t>(run, (*c)->capacity_rows - off);
    if (avail > 0)
      out->push_back(FetchSegment{*c, (*c)->data + static_cast<size_t>(off) * rb, avail});
    zeros(run - avail);
    r += run;
  }
}

}  // namespace pion::store
