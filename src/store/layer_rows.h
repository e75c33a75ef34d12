// Internal to src/store: the rows of one layer in chunks - writing with copy
// on write, and pinning runs of them for a fetch or a snapshot.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

// REQUIRES sd.mu. Copies stored rows into the layer's chunks; a chunk someone
// else holds a reference to (a fetch, a snapshot) is copied first. With a
// `backing` (non-null: `stored` lies in memory it keeps alive and unchanged, a
// mapped snapshot), a chunk that does not exist yet, is filled from its first
// row with as many rows as a new chunk's capacity would be (GrowCapacity) and
// whose rows are 64-byte aligned in `stored` is made by reference
// (Chunk::Borrow) instead.
void ApplyRowsLocked(Namespace& n, SideData& sd, uint32_t layer, uint64_t start, uint64_t count,
                     std::span<const uint8_t> stored,
                     const std::shared_ptr<const void>* backing = nullptr) REQUIRES(sd.mu);

// REQUIRES sd.mu. Makes `c` chunk `ci` of `layer` in place of any chunk
// there (which stays unchanged for its other holders); `c` has the full
// rows_per_chunk capacity, every row written, and no other holder that could
// write it. The layer's rows grow to cover it.
void InstallChunkLocked(Namespace& n, SideData& sd, uint32_t layer, uint64_t ci,
                        std::shared_ptr<Chunk> c) REQUIRES(sd.mu);

// REQUIRES the side's mu. Appends segments covering rows [start, end) of `L`
// (may be null) to `out`, `R` rows per chunk of `rb` bytes each.
void AppendSegments(const Layer* L, uint32_t R, size_t rb, uint64_t start, uint64_t end,
                    std::vector<FetchSegment>* out);

}  // namespace pion::store
