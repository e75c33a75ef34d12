// The records persistence reads and writes, and the three seams through which
// it meets the data it persists. src/persist knows no store type: the store
// side implements these interfaces (src/store/persist_adapter.h), so the
// dependency points from the store to persist's records, never back.
//
//  * Record: every record, one std::variant of plain structs (one per kind).
//  * MutationSink: where the store describes every change, as a Record, before
//    applying it; the WAL writer is one (persist/wal_writer.h), test recorders
//    are others.
//  * RecordSink: where recovery applies the Records it decoded (WAL replay,
//    snapshot load).
//  * SnapshotSource: where a snapshot reads a consistent, pinned view from.
//  * PersistHost: the three together as Persistence needs them, plus the few
//    counters it reports.
//
// The ADL customisation points MakePersistHost(T*) and MakeRecordSink(T*),
// declared by the store side, let Persistence and LoadSnapshot take the store
// itself without persist naming it. The store captures snapshots straight into
// SnapshotNamespace / SnapshotString and logs through MutationSink: persist's
// records are the store's vocabulary, with no mirror types on the store side.
//
// Thread-safety: interfaces; each implementation documents its own.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "quant/format.h"

namespace pion::persist {

enum class Side : uint8_t { kKeys = 0, kValues = 1 };  // "<ns>_pk", "<ns>_pv"
enum class DropReason : uint8_t { kDrop = 0, kEviction = 1 };

// A namespace's block table as logged: block size and hashes in registration
// order (the store adds its membership index on top).
struct BlockRecord {
  uint32_t block_size = 0;
  std::vector<uint64_t> hashes;
};

// KV.BLOCK.CHAIN as logged (STRCHAIN, docs/wal_format.md): the pairs, their
// hashes, TOKENS, the shared expiry and the parent of the first key (after,
// when has_after: it was a live key when the chain was written). Encoding
// uses value_len; decoding sets value (a view of the payload).
// A quantized block's format (KV.BLOCK.CHAIN ... FORMAT; WAL version 5 STRCHAIN
// has_format, snapshot version 6 QUANT section). row == 0: a plain value.
struct QuantRecord {
  quant::Format format = quant::Format::kFp16;
  uint8_t dtype = 0;  // what the rows decode to: 0 f16, 1 bf16, 2 f32
  uint32_t row = 0;   // elements per row
};
struct StrChainEntry {
  std::string_view key;
  uint64_t hash = 0;
  uint64_t value_len = 0;
  std::span<const uint8_t> value;
};
struct StrChainRecord {
  std::string_view after;
  bool has_after = false;
  bool has_hashes = false;
  uint32_t tokens = 0;
  int64_t expire_at_ms = 0;
  QuantRecord quant;  // row != 0: every value is a quantized block (has_format)
  std::span<const StrChainEntry> entries;
};
// A quantized string value's format in a snapshot (QUANT section, version 6).
struct StrQuantRecord {
  std::string_view key;
  QuantRecord quant;
};
// An extent of the disk tier's file as a snapshot references it (STRING_TIER
// section, version 7; docs/snapshot_format.md §6): what its header holds.
struct TierExtentRecord {
  uint64_t offset = 0;
  uint64_t length = 0;  // allocated bytes
  uint32_t header_bytes = 0;
  uint32_t value_crc = 0;
  uint64_t seq = 0;
};
// A string key whose value stays in the disk tier (STRING_TIER section).
struct StrTierRecord {
  std::string_view key;
  int64_t expire_at_ms = 0;
  uint64_t lru_stamp = 0;
  uint64_t value_len = 0;
  TierExtentRecord extent;
};
// A chunk of a namespace that lies in its extent of the disk tier
// (NAMESPACE_TIER section, version 8): rows [start, start + rows) of `side` and
// `layer` are the extent value's bytes from `value_offset`.
struct NsTierChunkRecord {
  Side side = Side::kKeys;
  uint32_t layer = 0;
  uint64_t start = 0;
  uint64_t rows = 0;
  uint64_t value_offset = 0;
};
// A namespace's chunks referenced in the disk tier (NAMESPACE_TIER section).
struct NsTierRecord {
  std::string_view ns;
  uint64_t incarnation = 0;
  uint32_t row_bytes = 0;
  uint64_t value_len = 0;
  TierExtentRecord extent;
  std::vector<NsTierChunkRecord> chunks;  // increasing (side, layer, start), not overlapping
};
// A string key's block metadata in a snapshot (BLOCK section, version 5).
struct StrBlockRecord {
  std::string_view key;
  std::string_view parent;  // empty: a root
  bool has_parent = false;
  bool has_hash = false;
  uint64_t hash = 0;
  uint32_t tokens = 0;
};

// REGISTER / REGISTER_CHILD (WAL) and NAMESPACE / NAMESPACE_CHILD (snapshot):
// a namespace created or re-registered (same dim/format). The block table is
// `hash_count` little-endian u64s at `hashes` (a view: of the payload when
// decoded, of the store's table when logged); has_blocks false: the
// registration carries none (an existing table is kept). A non-empty `parent`
// makes it the child form (REGISTER ... PARENT); a re-registration of a child
// is the plain form (its link never changes).
struct RegisterRec {
  std::string_view ns;
  uint64_t incarnation = 0;
  uint32_t kv_dim = 0;
  quant::Format fmt = quant::Format::kFp16;
  bool has_blocks = false;
  uint32_t block_size = 0;
  uint64_t hash_count = 0;
  const uint8_t* hashes = nullptr;  // hash_count little-endian u64
  uint64_t lru_stamp = 0;           // snapshot NAMESPACE only
  std::string_view parent;
  uint64_t parent_incarnation = 0;
};
// STORE (WAL) and ROWS (snapshot): `count` rows at [start, start+count) of one
// layer of one side, in stored form (count * row_bytes bytes). Logged with
// the rows in `rows`, or reserved with `rows` empty (the store writes them from
// its chunks). `backing` (snapshot load only, may be null): the rows lie in a
// mapped file it keeps mapped and unchanged, so the sink may keep them by
// reference instead of copying them (docs/snapshot_format.md §5).
struct StoreRec {
  std::string_view ns;
  uint64_t incarnation = 0;
  Side side = Side::kKeys;
  uint32_t layer = 0;
  uint64_t start = 0;
  uint64_t count = 0;
  uint32_t row_bytes = 0;
  std::span<const uint8_t> rows;
  const std::shared_ptr<const void>* backing = nullptr;
};
struct DropRec {
  std::string_view ns;
  uint64_t incarnation = 0;
  DropReason reason = DropReason::kDrop;
};
struct FlushAllRec {};
// STRSET (WAL) and STRING (snapshot; with lru_stamp, 0 for WAL records: the
// key becomes the most recent). value_len bytes of value: in `value` when
// decoded or logged whole, written after the reservation when reserved.
struct StrSetRec {
  std::string_view key;
  int64_t expire_at_ms = 0;
  uint64_t lru_stamp = 0;
  uint64_t value_len = 0;
  std::span<const uint8_t> value;
};
// STRPATCH: `bytes` written at `offset` of the key's value (zero-filled from
// its old end), the value cut at the patch's end when `truncate`; the expiry
// is set to expire_at_ms. A missing key starts empty. Logged whole (an edit is
// small or is an APPEND's tail: the log grows by what changed).
struct StrPatchRec {
  std::string_view key;
  int64_t expire_at_ms = 0;
  bool truncate = false;
  uint64_t offset = 0;
  std::span<const uint8_t> bytes;
};
// STRDEL. reason: 0 DEL/UNLINK/GETDEL, 1 eviction, 2 expiry.
struct StrDelRec {
  std::string_view key;
  uint8_t reason = 0;
};
// STREXPIRE. expire_at_ms 0 = PERSIST.
struct StrExpireRec {
  std::string_view key;
  int64_t expire_at_ms = 0;
};
struct StrRenameRec {
  std::string_view key;
  std::string_view dst;
};
// A namespace's LRU stamp (snapshot load, after every section).
struct LruStampRec {
  std::string_view ns;
  uint64_t stamp = 0;
};

// Every record persistence logs or restores, one struct per kind. The WAL's
// kinds have one encode and one decode in wal_format.cc (EncodeWal,
// DecodeWal); the snapshot-only kinds (LruStampRec, StrBlockRecord,
// StrQuantRecord, StrTierRecord, NsTierRecord) come from snapshot sections. Records are views:
// they borrow the caller's bytes.
using Record = std::variant<RegisterRec, StoreRec, DropRec, FlushAllRec, StrSetRec, StrDelRec,
                            StrExpireRec, StrRenameRec, StrPatchRec, StrChainRecord, LruStampRec,
                            StrBlockRecord, StrQuantRecord, StrTierRecord, NsTierRecord>;

// Builds a visitor from lambdas: std::visit(Overloaded{[](const StoreRec&) {...},
// [](const auto&) {}}, record) handles the kinds it names and ignores the rest.
template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

// The block table a REGISTER or NAMESPACE carries (REQUIRES r.has_blocks).
inline BlockRecord BlockRecordOf(const RegisterRec& r) {
  BlockRecord b;
  b.block_size = r.block_size;
  b.hashes.resize(r.hash_count);
  if (r.hash_count) std::memcpy(b.hashes.data(), r.hashes, r.hash_count * 8);
  return b;
}

// The converse, to log `b` (kept alive until the record is written).
inline void CarryBlocks(const BlockRecord& b, RegisterRec* r) {
  r->has_blocks = true;
  r->block_size = b.block_size;
  r->hash_count = b.hashes.size();
  r->hashes = reinterpret_cast<const uint8_t*>(b.hashes.data());
}

// A reserved record: its LSN (0 if the log assigns it only when writing) and
// the call that writes it with its body (the rows, the value bytes, or the
// block table's hashes as little-endian u64s) and returns its LSN or the
// write's error.
struct PendingRecord {
  uint64_t lsn = 0;
  std::function<Result<uint64_t>(std::span<const uint8_t> body)> write;
  // Optional (null: the sink has none): the same write with the body in
  // pieces, in order (a store's rows straight from the chunks they were encoded
  // into). Call exactly one of write / write_parts.
  std::function<Result<uint64_t>(std::span<const std::span<const uint8_t>> parts)> write_parts;
  // For a sink that logs nothing of this record: both writes return `at`.
  void Unlogged(uint64_t at = 0) {
    lsn = at;
    write = [at](std::span<const uint8_t>) { return Result<uint64_t>(at); };
    write_parts = [at](std::span<const std::span<const uint8_t>>) { return Result<uint64_t>(at); };
  }
};

// The mutation seam between the store and persistence. Every change to the
// store is described to a MutationSink *before* it is applied; the sink appends
// it to the write-ahead log and returns a log sequence number (LSN). A reply is
// only sent once the LSN is durable as the fsync policy requires
// (Persistence::WaitDurable, or the server's durability gate holding the
// reply). If the sink fails
// (disk full, I/O error) the change is not applied and the command answers the
// error: the store never holds state the log does not describe. (One window:
// a record written while an earlier one fails is cut off the file with it; the
// WAL then refuses writes until a snapshot, which holds that state, succeeds -
// docs/wal_format.md §6.)
//
// Records carry rows in their *stored* form, so replay never re-quantizes.
//
// Incarnations: every namespace created gets a new number (a counter that only
// grows, restored by recovery). Store and drop records carry it, and replay
// applies a record only to the same incarnation. This makes a race harmless in
// which a store to a namespace that is concurrently dropped and re-registered is
// logged after the new registration: live, it went to the dropped object; on
// replay it is skipped. (Stores are reserved under the namespace's side lock, not
// the global lock, and written with neither, so that large payloads never
// block other namespaces.)
// Two-phase appends (docs/ARCHITECTURE.md "Store", "Locks"): the records with a
// large body (STORE rows, STRSET and STRCHAIN values, a REGISTER's block
// table) are *reserved* with the store's locks held, which fixes their LSN and
// log position (and so the replay order), and *written* (checksummed and
// copied into the log) after those locks are released. The store applies such
// a change only once its write succeeded, in reservation order per namespace
// side, so it still never holds state the log does not describe. Every
// successful reservation is written exactly once (a sink may wait for reserved
// records, e.g. to rotate).
//
// Thread-safety: the sink is called concurrently from worker threads; it must
// serialise reservations itself. The one-shot calls and the reservations are
// made with store locks held (never while waiting on disk); the writes of
// reserved records with none.
class MutationSink {
 public:
  virtual ~MutationSink() = default;

  // With `out`: reserves `r` (its LSN and log position) and returns its LSN
  // (also out->lsn; 0 if the sink assigns it at write time); the body (the
  // rows, values or hashes the record announces: StoreRec count * row_bytes,
  // StrSetRec value_len, StrChainRecord the entries' value_len back to back,
  // RegisterRec hash_count * 8) is written through out->write / write_parts.
  // Without (nullptr): writes `r` whole at once, its body from the record,
  // and returns its LSN. A sink handles the kinds it logs and ignores the rest
  // (out->Unlogged()).
  virtual Result<uint64_t> Reserve(const Record& r, PendingRecord* out) = 0;
  // A record written whole (DROP, FLUSHALL, STRDEL, STRPATCH ...).
  Result<uint64_t> Log(const Record& r) { return Reserve(r, nullptr); }
};

// Decoded records applied in log order (WAL replay), or a snapshot's sections
// in file order (snapshot load). Apply returns NotFound for a record it skips
// because its namespace is absent or of another incarnation (replay counts
// it), another error for a record that contradicts the data. A sink handles
// the kinds it cares about and returns OK for the rest.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual Status Apply(const Record& r) = 0;
};

// A run of `rows` consecutive stored rows at `data` (kept alive by `pin`), or
// zeros when data == nullptr.
struct SnapshotSegment {
  std::shared_ptr<const void> pin;
  const uint8_t* data = nullptr;
  uint64_t rows = 0;
  // The rows lie in the namespace's extent of the disk tier (written), at this
  // offset of its value: a default-path snapshot references them (a
  // NAMESPACE_TIER section) instead of copying them; `data` still points at them.
  bool in_tier = false;
  uint64_t tier_offset = 0;
};

// A consistent, pinned view of one namespace.
struct SnapshotNamespace {
  std::string ns;
  uint32_t kv_dim = 0;
  quant::Format fmt = quant::Format::kFp16;
  uint64_t incarnation = 0;
  uint64_t lru_stamp = 0;
  std::string parent;  // empty for a root (NAMESPACE_CHILD otherwise)
  uint64_t parent_incarnation = 0;
  std::shared_ptr<const BlockRecord> blocks;  // may be null
  struct Layer {
    uint32_t layer = 0;
    uint64_t rows = 0;
    std::vector<SnapshotSegment> segments;  // covering [0, rows)
  };
  std::vector<Layer> layers[2];  // [Side]; only layers with rows > 0
  // Some segments are in the namespace's extent of the disk tier (in_tier):
  // what its header holds, the value's length, and the snapshot's hold on it
  // (SnapshotSource::SnapshotCommitted), as SnapshotString's.
  bool in_tier = false;
  TierExtentRecord tier;
  uint64_t tier_value_len = 0;
  std::shared_ptr<const void> tier_pin;
};

// A pinned string key (snapshot version 2 STRING section).
struct SnapshotString {
  std::string key;
  int64_t expire_at_ms = 0;
  uint64_t lru_stamp = 0;
  std::shared_ptr<const void> pin;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  // A block (KV.BLOCK.CHAIN; a BLOCK section after the STRING sections).
  bool is_block = false;
  bool has_parent = false;
  std::string parent;
  bool has_hash = false;
  uint64_t hash = 0;
  uint32_t tokens = 0;
  // A quantized block (KV.BLOCK.CHAIN ... FORMAT; a QUANT section) when row != 0.
  QuantRecord quant;
  // The value lives in the disk tier, written and unchanged: a default-path
  // snapshot references `tier` (a STRING_TIER section) instead of copying the
  // bytes (`data` still points at them, for other paths). `tier_pin` keeps the
  // extent allocated (SnapshotSource::SnapshotCommitted).
  bool in_tier = false;
  TierExtentRecord tier;
  std::shared_ptr<const void> tier_pin;
};

class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  // The string keys pinned by the last CaptureSnapshot (at its barrier),
  // least recently used first; empties them. Default: none.
  virtual std::vector<SnapshotString> TakeCapturedStrings() { return {}; }
  // Blocks every mutation, calls `at_barrier` (nothing logged after it belongs
  // in the snapshot), pins every namespace, lets mutations go on, returns the views.
  virtual std::vector<SnapshotNamespace> CaptureSnapshot(const std::function<Status()>& at_barrier,
                                                         Status* barrier_status) = 0;
  // Makes the disk tier's extents durable (fdatasync): called after a snapshot
  // that references them was synced and before it is renamed into place.
  virtual Status SyncTierForSnapshot() { return Status::OK(); }
  // A default-path snapshot was renamed into place: `tier_pins` (its
  // SnapshotString and SnapshotNamespace tier_pin values) replace the extents the previous one
  // referenced, which may be reused from now on (docs/tier_format.md §3).
  virtual void SnapshotCommitted(std::vector<std::shared_ptr<const void>> tier_pins) {
    (void)tier_pins;
  }
};

// What recovery reports of the data it restored.
struct HostCounts {
  uint64_t namespaces = 0;
  uint64_t sessions = 0;
  uint64_t rows = 0;   // over every layer of every session
  uint64_t bytes = 0;  // held in stored form
};

class PersistHost : public RecordSink, public SnapshotSource {
 public:
  // Makes `log` the destination of every later change (nullptr: log nothing).
  virtual void AttachLog(MutationSink* log) = 0;
  virtual HostCounts Counts() const = 0;
};

}  // namespace pion::persist
