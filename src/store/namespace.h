// Internal to src/store: the prefix value, a namespace's in-memory form. Each
// side holds its layers of rows in chunks (store/chunk.h) under its own mutex;
// the fields marked so are guarded by Keyspace::mu (see store.h for the lock
// order). Its row operations (encode a store's rows, apply them, plan a fetch,
// describe a side) are methods of the value (store/namespace.cc); the store
// finds the namespace, charges the budget, logs and orders the writes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "quant/format.h"
#include "store/block_index.h"
#include "store/chunk.h"
#include "store/mutation.h"
#include "store/store_types.h"
#include "tier/tier_file.h"

namespace pion::store {

struct Layer {
  uint64_t rows = 0;  // high-water mark: rows [0, rows) exist (unwritten ones read as zeros)
  std::vector<std::shared_ptr<Chunk>> chunks;
};

struct SideData {
  mutable base::Mutex mu;
  std::vector<Layer> layers GUARDED_BY(mu);  // size = highest layer written + 1
  uint64_t total_rows GUARDED_BY(mu) = 0;    // sum of Layer::rows
  // layers[0].rows (0 while there is no layer), written under `mu` with it;
  // Store::Lookup reads it under the namespace's shard lock only (no side lock
  // and no reference taken: two locked read-modify-writes each).
  std::atomic<uint64_t> layer0_rows{0};
  // Stores reserve (rows counted in the budget, log record reserved) in one
  // hold of `mu` and apply in a later one, after their record is written; they
  // apply in reservation order (tickets), which is their LSN order.
  base::CondVar turn;
  uint64_t next_ticket GUARDED_BY(mu) = 0;     // handed out at reservation
  uint64_t applied_ticket GUARDED_BY(mu) = 0;  // every ticket below it has applied or failed
  // Per layer: high-water mark including reservations.
  std::vector<uint64_t> reserved_rows GUARDED_BY(mu);
  uint64_t reserved_total GUARDED_BY(mu) = 0;  // sum of reserved_rows (>= total_rows)
};

class Namespace {
 public:
  Namespace(std::string n, uint64_t inc, uint32_t d, quant::Format f,
            std::shared_ptr<Namespace> p = nullptr)
      : name(std::move(n)),
        incarnation(inc),
        dim(d),
        fmt(f),
        row_bytes(quant::RowBytes(f, d)),
        rows_per_chunk(RowsPerChunk(row_bytes)),
        parent(std::move(p)),
        depth(parent ? parent->depth + 1 : 0) {}

  const std::string name;
  const uint64_t incarnation;
  const uint32_t dim;
  const quant::Format fmt;
  const size_t row_bytes;
  const uint32_t rows_per_chunk;
  // Lineage (KV.PREFIX.REGISTER ... PARENT), fixed at creation, so that an
  // access walks it with no lock: the parent this namespace continues (kept
  // alive by this reference; null for a root) and the number of ancestors.
  const std::shared_ptr<Namespace> parent;
  const uint32_t depth;
  SideData sides[2];
  // LRU stamp; only ever raised (Store::Touch), so a parent's is never below a child's.
  std::atomic<uint64_t> stamp{0};

  // Guarded by Keyspace::mu; prefill_us and blocks are also written only under
  // the namespace's shard lock, which is what Lookup and Blocks read them under.
  bool dropped = false;
  uint64_t bytes = 0;
  std::shared_ptr<const BlockTable> blocks;
  uint64_t prefill_us = 0;
  std::vector<Namespace*> children;  // live children (in the map); each holds a reference to us
  uint32_t pending_children = 0;     // child registrations reserved but not yet applied
  // The disk tier (store/tier_namespaces.cc), guarded by Keyspace::mu: the rows
  // live in `tier_extent` (still in RAM while its write is in flight; then
  // the chunks borrow the tier's mapping). `bytes` stays what is stored;
  // `tier_uncharged` of it (the rows) is not charged to the RAM budget.
  bool tiered = false;
  tier::ExtentRef tier_extent;
  uint64_t tier_uncharged = 0;
  // The extent some chunks borrow (unchecked bytes: the next read checks the
  // extent first, Store::CheckTieredNamespace), guarded by Keyspace::mu; `maps_tier`
  // says it is set without the lock (a read of a namespace in RAM pays a load).
  tier::ExtentRef mapped_extent;
  std::atomic<bool> maps_tier{false};

  SideData& side(Side s) { return sides[static_cast<int>(s)]; }
  const SideData& side(Side s) const { return sides[static_cast<int>(s)]; }

  // ---- Row operations (store/namespace.cc): no store lock needed ----

  // A store's input rows [start, start + count) in stored form, split at chunk
  // boundaries into `*pieces` (cleared first): every whole chunk is encoded
  // (or copied, or, F16 rows into an fp16 namespace, taken by reference from
  // `in.owner`'s buffer) straight into a fresh chunk nobody sees yet; the
  // partial chunks at either end point into a per-thread scratch buffer (or
  // into the input itself), valid until this thread's next call. One pass per
  // stored byte. Errors: kSizeMismatch (the blob is not count x dim rows), an
  // encoding error (a non-finite row, named from the first row of the store).
  Status EncodeRows(uint64_t start, uint64_t count, const RowInput& in,
                    std::vector<RowPiece>* pieces) const;
  // The apply step of a store whose turn it is (side lock held): each piece
  // becomes the rows it covers (a whole chunk is swapped in; other pieces are
  // copied, copy on write). `backing`: see Store::ApplyStored.
  void ApplyPiecesLocked(SideData& sd, uint32_t layer, std::span<const RowPiece> pieces,
                         const std::shared_ptr<const void>* backing) REQUIRES(sd.mu);
  // Fetch plans: the chunk runs that answer rows [start, end) of a layer, a
  // list of row ids, or the same range of every layer (num_layers > 0: the
  // first that many, at most kMaxLayers; 0: all; kNothingStored when there is
  // none). Rows never written read as zeros. Each takes the side lock.
  FetchPlan PlanRange(Side s, uint32_t layer, uint64_t start, uint64_t end);
  FetchPlan PlanIds(Side s, uint32_t layer, std::span<const uint64_t> ids);
  Result<std::vector<FetchPlan>> PlanLayers(Side s, uint64_t start, uint64_t end,
                                            uint32_t num_layers);
  // One side's layers and sizes (V.INFO).
  SessionInfo Describe(Side s) const;

 private:
  FetchPlan EmptyPlan(uint64_t rows) const;
};

// Both sides' locks of a namespace. The analysis (base/thread_annotations.h)
// does not tell array elements apart: to it sides[0].mu and sides[1].mu are
// one lock, so these name sides[0].mu for the pair, and a side's fields are
// checked against "a side lock of this namespace held".
//
// Takes both, side 0 first (the order every holder of two uses).
class SCOPED_CAPABILITY SidesLock {
 public:
  explicit SidesLock(const Namespace& n) ACQUIRE(n.sides[0].mu) NO_THREAD_SAFETY_ANALYSIS : n_(n) {
    n_.sides[0].mu.Lock();
    n_.sides[1].mu.Lock();
  }
  ~SidesLock() RELEASE() NO_THREAD_SAFETY_ANALYSIS {
    n_.sides[1].mu.Unlock();
    n_.sides[0].mu.Unlock();
  }
  SidesLock(const SidesLock&) = delete;
  SidesLock& operator=(const SidesLock&) = delete;

 private:
  const Namespace& n_;
};

// Both, tried: true with both held, false with neither. Under Keyspace::mu a
// side lock is only ever tried (the lock order is side -> Keyspace::mu), so a
// namespace being written is passed over, not waited for.
inline bool TryLockSides(const Namespace& n)
    TRY_ACQUIRE(true, n.sides[0].mu) NO_THREAD_SAFETY_ANALYSIS {
  if (!n.sides[0].mu.TryLock()) return false;
  if (n.sides[1].mu.TryLock()) return true;
  n.sides[0].mu.Unlock();
  return false;
}
inline void UnlockSides(const Namespace& n) RELEASE(n.sides[0].mu) NO_THREAD_SAFETY_ANALYSIS {
  n.sides[1].mu.Unlock();
  n.sides[0].mu.Unlock();
}

// Heap bytes of a block table (0 for none), counted in vstore_bytes.
inline uint64_t TableBytes(const std::shared_ptr<const BlockTable>& t) {
  return t ? t->MemoryBytes() : 0;
}

}  // namespace pion::store
