// The prefix value: a namespace's in-memory form. Each side holds its layers
// of rows in chunks (store/chunk.h) under its own mutex. Two owners hold it:
// the Store (its map of namespaces; the fields marked so are guarded by
// Keyspace::mu, see store.h for the lock order) and the Redis module, whose data
// type holds one namespace per Redis key (module/ns_value.h), with no Store.
//
// What a namespace is and does is here, once, for both: its row operations
// (encode a store's rows, apply them, plan a fetch, describe a side; methods,
// store/namespace.cc), and the free functions below - registration and its
// checks (store/ns_register.cc), what it answers about itself (lookup, block
// table, chain, tallies: store/ns_describe.cc), a writer's checks and the
// write of a single caller (store/ns_write.cc), and its snapshot view
// (store/ns_capture.cc). The store finds the namespace, charges the budget,
// logs, orders the writes and keeps the LRU around these; the module calls
// them directly, one command at a time.
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
#include "store/reason.h"
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
  // OpLookup reads it under the namespace's shard lock only (no side lock
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

  // The rows a store ending at `end` adds to `layer`'s reserved high-water mark.
  uint64_t ReserveGrowthLocked(uint32_t layer, uint64_t end) const REQUIRES(mu) {
    const uint64_t old = layer < reserved_rows.size() ? reserved_rows[layer] : 0;
    return end > old ? end - old : 0;
  }
  // Reserves rows up to `end` of `layer`; returns the store's ticket (its turn
  // to apply: wait on `turn` until applied_ticket reaches it).
  uint64_t ReserveLocked(uint32_t layer, uint64_t end) REQUIRES(mu);
  // The turn of the ticket that applied (or failed) just now ends. When none
  // is pending any more and a reservation failed, the reservations go back to
  // the rows stored; returns the rows so given back (else 0). The caller
  // signals `turn`.
  uint64_t EndTurnLocked() REQUIRES(mu);
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

  // In a store, guarded by Keyspace::mu; prefill_us and blocks are also written
  // only under the namespace's shard lock, which is what Lookup and Blocks
  // read them under. An unshared namespace (the module's) uses only blocks
  // and prefill_us of these, from its one caller; `bytes`, the store's budget
  // accounting, stays 0 there.
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

// ---- Registration (store/ns_register.cc) ----
//
// "Unshared" below: a namespace that no Store holds and that one caller at a
// time uses (the module's value, on Redis's main thread). Such a caller needs
// none of the Store's locks; the side locks are still taken where the value's
// own methods take them.

// What the grammar (kvproto ParseRegister) has checked of a registration's
// arguments - a name of 1..512 bytes, kv_dim 1..16384 that the format
// supports - asserted in debug builds (OpRegister and RegisterUnshared).
void AssertRegisterArgs(const RegisterArgs& a);
// A re-registration of `n`: kRegisteredOther (another kv_dim or format, the
// error naming n's), kParentMismatch (PARENT given and not n's parent).
Status CheckReregister(const Namespace& n, const RegisterArgs& a);
// The table a registration installs: a.blocks, finished (its index built;
// copied only when the caller did not finish it). Null: keep any existing one.
std::shared_ptr<const BlockTable> RegisteredTable(const RegisterArgs& a);
// A new namespace as a registration makes it: a.ns, kv_dim, format, `table`
// and PREFILL_MS, linked to `parent` (may be null). Not yet in any store.
std::shared_ptr<Namespace> NewNamespace(const RegisterArgs& a, uint64_t incarnation,
                                        std::shared_ptr<Namespace> parent,
                                        std::shared_ptr<const BlockTable> table);
// A re-registration applied: the table replaced when `table` is set, and
// PREFILL_MS replaced (0 when not given). A store holds the locks that guard
// the two (Namespace, above).
void SetRegistration(Namespace& n, std::shared_ptr<const BlockTable> table, const RegisterArgs& a);
// A registration of an unshared namespace: creates it (*n null; incarnation
// 1, no parent) or re-registers *n, with OpRegister's checks and errors
// (a parent is for a store's namespaces: PARENT is refused with
// kParentNotFound on a new one).
Status RegisterUnshared(const RegisterArgs& a, std::shared_ptr<Namespace>* n);

// ---- What a namespace answers about itself (store/ns_describe.cc; the two
// on every LOOKUP, BLOCKS and MEMBERSHIP inline here) ----

// KV.PREFIX.LOOKUP's answer (a hit): PREFILL_MS and the K side's layer-0 rows
// (its atomic mirror: no side lock). A store holds n's shard lock.
inline LookupResult LookupOf(const Namespace& n) {
  LookupResult res;
  res.hit = true;
  res.prefill_us = n.prefill_us;
  res.layer0_tokens = n.side(Side::kKeys).layer0_rows.load(std::memory_order_relaxed);
  return res;
}
// The block table when it has hashes, else null (KV.PREFIX.BLOCKS, MEMBERSHIP).
// A store holds n's shard lock.
inline const std::shared_ptr<const BlockTable>* NonEmptyBlocks(const Namespace& n) {
  const auto& t = n.blocks;
  if (!t || t->hashes.empty()) return nullptr;
  return &t;
}
// KV.PREFIX.INFO's lineage fields: parent, depth, chain length, the K side's
// layer-0 rows of n and of its chain (each side lock in turn). `children` and
// `on_disk` are a store's, left as they are.
void DescribeChain(const Namespace& n, NamespaceInfo* out);
// Both sides' rows, the K side's layer-0 rows and the bytes of the row chunks
// allocated (each side lock in turn).
struct RowTally {
  uint64_t rows = 0;           // every layer of both sides
  uint64_t prefix_tokens = 0;  // K side, layer 0
  uint64_t chunk_bytes = 0;    // allocated (>= rows x row_bytes)
};
RowTally TallyRows(const Namespace& n);

// ---- Writing rows (store/ns_write.cc) ----

// What the grammar (kvproto ParseStoreBatch) has checked of a store's
// arguments - layer < 256, 1 <= count, start + count <= kMaxTokens - asserted
// in debug builds.
void AssertStoreArgs(uint32_t layer, uint64_t start, uint64_t count);
// A record of stored rows (recovery, RDB load, PION.LOADROWS) against n:
// Corruption when the layer, range or size does not fit.
Status CheckStoredArgs(const Namespace& n, uint32_t layer, uint64_t start, uint64_t count,
                       size_t bytes);
// V.STOREBATCH into an unshared namespace: AssertStoreArgs, EncodeRows, and the
// apply (a reservation and its turn at once, so the side's bookkeeping stays
// what a store's would be).
Status StoreRowsUnshared(Namespace& n, Side s, uint32_t layer, uint64_t start, uint64_t count,
                         const RowInput& in);
// Rows already in stored form into an unshared namespace: CheckStoredArgs,
// then copied in (no re-encoding).
Status ApplyStoredUnshared(Namespace& n, Side s, uint32_t layer, uint64_t start, uint64_t count,
                           std::span<const uint8_t> stored);

// ---- Its snapshot view (store/ns_capture.cc) ----

// Fills `v` with n's name, shape, incarnation, stamp, parent and both sides'
// stored layers as pinned segments (each chunk frozen: a later write copies
// it). `mapped`: the written extent of the disk tier n's chunks may borrow
// (null: none); a segment in it is marked so and `v` records the extent. The
// block table (`v->blocks`) is the caller's to set, under the lock it needs.
void CaptureNamespace(Namespace& n, const tier::ExtentRef& mapped, persist::SnapshotNamespace* v);

}  // namespace pion::store
