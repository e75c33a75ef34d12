// The records persistence reads and writes, and the three seams through which
// it meets the data it persists. src/persist knows no store type: the store
// side implements these interfaces (src/store/persist_adapter.h), so the
// dependency points from the store to persist's records, never back.
//
//  * RecordLog: what the WAL writer offers to log a change (the store's
//    MutationSink is adapted onto it). Contract as store/mutation.h describes.
//  * RecordSink: where recovery writes the records it decoded (WAL replay,
//    snapshot load).
//  * SnapshotSource: where a snapshot reads a consistent, pinned view from.
//  * PersistHost: the three together as Persistence needs them, plus the few
//    counters it reports.
//
// The ADL customisation points MakePersistHost(T*), MakeRecordSink(T*) and
// ToSnapshotNamespaces(const std::vector<T>&), declared by the store side, let
// Persistence, LoadSnapshot and WriteSnapshot take the store's own types
// without persist naming them.
//
// Thread-safety: interfaces; each implementation documents its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
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

// A reserved record: its LSN (0 if the log assigns it only when writing) and
// the call that writes it with its body (the rows, or the block table's hashes
// as little-endian u64s) and returns its LSN or the write's error.
struct PendingRecord {
  uint64_t lsn = 0;
  std::function<Result<uint64_t>(std::span<const uint8_t> body)> write;
};

class RecordLog {
 public:
  virtual ~RecordLog() = default;
  virtual Result<uint64_t> OnRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                      quant::Format fmt, const BlockRecord* blocks) = 0;
  virtual Result<uint64_t> OnStore(std::string_view ns, uint64_t incarnation, Side side,
                                   uint32_t layer, uint64_t start, uint64_t count,
                                   std::span<const uint8_t> stored) = 0;
  virtual Result<uint64_t> OnDrop(std::string_view ns, uint64_t incarnation, DropReason reason) = 0;
  virtual Result<uint64_t> OnFlushAll() = 0;
  virtual Status ReserveStore(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                              uint64_t start, uint64_t count, uint32_t row_bytes,
                              PendingRecord* out) = 0;
  virtual Status ReserveRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                 quant::Format fmt, std::shared_ptr<const BlockRecord> blocks,
                                 PendingRecord* out) = 0;
  // A new namespace linked to a parent (WAL version 3 REGISTER_CHILD); as ReserveRegister.
  virtual Status ReserveRegisterChild(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                      quant::Format fmt, std::shared_ptr<const BlockRecord> blocks,
                                      std::string_view parent_ns, uint64_t parent_incarnation,
                                      PendingRecord* out) = 0;
  // String keys (WAL version 2). STRSET is two-phase: its body is the value.
  virtual Status ReserveStrSet(std::string_view key, int64_t expire_at_ms, uint64_t value_len,
                               PendingRecord* out) = 0;
  virtual Result<uint64_t> OnStrDel(std::string_view key, uint8_t reason) = 0;
  virtual Result<uint64_t> OnStrExpire(std::string_view key, int64_t expire_at_ms) = 0;
  virtual Result<uint64_t> OnStrRename(std::string_view src, std::string_view dst) = 0;
};

// Decoded records applied in log order. Records of another incarnation than
// the namespace's current one are skipped (ApplyStored returns NotFound,
// ApplyDrop does nothing).
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual Status ApplyRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                               quant::Format fmt, const BlockRecord* blocks) = 0;
  // A namespace linked to `parent_ns` (REGISTER_CHILD, NAMESPACE_CHILD). Default:
  // as ApplyRegister (a sink that does not keep links).
  virtual Status ApplyRegisterChild(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                    quant::Format fmt, const BlockRecord* blocks,
                                    std::string_view parent_ns, uint64_t parent_incarnation) {
    (void)parent_ns, (void)parent_incarnation;
    return ApplyRegister(ns, incarnation, kv_dim, fmt, blocks);
  }
  virtual Status ApplyStored(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                             uint64_t start, uint64_t count, std::span<const uint8_t> stored) = 0;
  // Rows inside a mapped snapshot file that `backing` keeps mapped and unchanged
  // (snapshot load, docs/snapshot_format.md §5): the sink may keep them by
  // reference instead of copying them. Default: ApplyStored (a copy).
  virtual Status ApplyStoredMapped(std::string_view ns, uint64_t incarnation, Side side,
                                   uint32_t layer, uint64_t start, uint64_t count,
                                   std::span<const uint8_t> stored,
                                   const std::shared_ptr<const void>& backing) {
    (void)backing;
    return ApplyStored(ns, incarnation, side, layer, start, count, stored);
  }
  virtual void ApplyDrop(std::string_view ns, uint64_t incarnation) = 0;
  virtual void ApplyFlushAll() = 0;
  // Restores a namespace's LRU stamp (snapshot load).
  virtual void SetLruStamp(std::string_view ns, uint64_t stamp) = 0;
  // String keys (defaults ignore them: a sink that checks namespaces only).
  // lru_stamp is 0 for WAL records (the key becomes the most recent).
  virtual void ApplyStrSet(std::string_view key, int64_t expire_at_ms, uint64_t lru_stamp,
                           std::span<const uint8_t> value) {
    (void)key, (void)expire_at_ms, (void)lru_stamp, (void)value;
  }
  virtual void ApplyStrDel(std::string_view key) { (void)key; }
  virtual void ApplyStrExpire(std::string_view key, int64_t expire_at_ms) {
    (void)key, (void)expire_at_ms;
  }
  virtual void ApplyStrRename(std::string_view src, std::string_view dst) { (void)src, (void)dst; }
};

// A run of `rows` consecutive stored rows at `data` (kept alive by `pin`), or
// zeros when data == nullptr.
struct SnapshotSegment {
  std::shared_ptr<const void> pin;
  const uint8_t* data = nullptr;
  uint64_t rows = 0;
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
};

// A pinned string key (snapshot version 2 STRING section).
struct SnapshotString {
  std::string key;
  int64_t expire_at_ms = 0;
  uint64_t lru_stamp = 0;
  std::shared_ptr<const void> pin;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
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
  virtual void AttachLog(RecordLog* log) = 0;
  virtual HostCounts Counts() const = 0;
};

}  // namespace pion::persist
