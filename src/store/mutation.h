// The mutation seam between the store and persistence. Every change to the
// store is described to a MutationSink *before* it is applied; the sink appends
// it to the write-ahead log and returns a log sequence number (LSN). A reply is
// only sent once the LSN is durable as the fsync policy requires
// (MutationSink::WaitDurable / the server's deferred replies). If the sink fails
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
// large body (STORE rows, a REGISTER's block table) are *reserved* with the
// store's locks held, which fixes their LSN and log position (and so the
// replay order), and *written* (checksummed and copied into the log) after
// those locks are released. The store applies such a change only once its
// write succeeded, in reservation order per namespace side, so it still never
// holds state the log does not describe. Every successful reservation is
// written exactly once (a sink may wait for reserved records, e.g. to rotate).
// Thread-safety: the sink is called concurrently from worker threads; it must
// serialise reservations itself. The one-shot calls and the reservations are
// made with store locks held (never while waiting on disk); the writes of
// reserved records with none.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "persist/records.h"
#include "quant/format.h"

namespace pion::store {

struct BlockTable;

// The record vocabulary is persistence's (persist/records.h); the store uses it
// as its own.
using Side = persist::Side;  // "<ns>_pk", "<ns>_pv"
using DropReason = persist::DropReason;
using PendingRecord = persist::PendingRecord;

class MutationSink {
 public:
  virtual ~MutationSink() = default;

  // A namespace is created or re-registered (same dim/format). `blocks` is the
  // new block table, or nullptr when the registration carries none (an existing
  // table is then kept).
  virtual Result<uint64_t> OnRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                      quant::Format fmt, const BlockTable* blocks) = 0;
  // A new namespace that continues `parent_ns` (REGISTER ... PARENT): as
  // OnRegister, plus the parent's name and incarnation. (A re-registration of a
  // child is an OnRegister: its link never changes.)
  virtual Result<uint64_t> OnRegisterChild(std::string_view ns, uint64_t incarnation,
                                           uint32_t kv_dim, quant::Format fmt,
                                           const BlockTable* blocks, std::string_view parent_ns,
                                           uint64_t parent_incarnation) = 0;
  // `count` rows at [start, start+count) of one layer of one side, in stored form
  // (count * RowBytes(fmt, kv_dim) bytes).
  virtual Result<uint64_t> OnStore(std::string_view ns, uint64_t incarnation, Side side,
                                   uint32_t layer, uint64_t start, uint64_t count,
                                   std::span<const uint8_t> stored) = 0;
  virtual Result<uint64_t> OnDrop(std::string_view ns, uint64_t incarnation, DropReason reason) = 0;
  virtual Result<uint64_t> OnFlushAll() = 0;

  // String keys (docs/wal_format.md, STRSET .. STRRENAME). The defaults log
  // nothing (a sink that records only namespaces).
  // STRSET is two-phase: reserved (LSN fixed) with the store's lock held, its
  // body (the value bytes, exactly value_len) written after it is released.
  virtual Status ReserveStrSet(std::string_view key, int64_t expire_at_ms, uint64_t value_len,
                               PendingRecord* out) {
    (void)key, (void)expire_at_ms, (void)value_len;
    out->lsn = 0;
    out->write = [](std::span<const uint8_t>) { return Result<uint64_t>(uint64_t{0}); };
    return Status::OK();
  }
  // reason: 0 DEL/UNLINK/GETDEL, 1 eviction, 2 expiry.
  virtual Result<uint64_t> OnStrDel(std::string_view key, uint8_t reason) {
    (void)key, (void)reason;
    return uint64_t{0};
  }
  // expire_at_ms 0 = PERSIST.
  virtual Result<uint64_t> OnStrExpire(std::string_view key, int64_t expire_at_ms) {
    (void)key, (void)expire_at_ms;
    return uint64_t{0};
  }
  virtual Result<uint64_t> OnStrRename(std::string_view src, std::string_view dst) {
    (void)src, (void)dst;
    return uint64_t{0};
  }

  // Two-phase forms. The defaults defer to the one-shot calls at write time
  // (fine for a sink with no ordering of its own, e.g. a test recorder); the
  // WAL overrides them to reserve the LSN and file space here.
  virtual Status ReserveStore(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                              uint64_t start, uint64_t count, uint32_t row_bytes,
                              PendingRecord* out) {
    (void)row_bytes;
    out->lsn = 0;
    out->write = [this, n = std::string(ns), incarnation, side, layer, start,
                  count](std::span<const uint8_t> body) {
      return OnStore(n, incarnation, side, layer, start, count, body);
    };
    return Status::OK();
  }
  // `blocks` as for OnRegister; kept alive until the write.
  virtual Status ReserveRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                 quant::Format fmt, std::shared_ptr<const BlockTable> blocks,
                                 PendingRecord* out) {
    out->lsn = 0;
    out->write = [this, n = std::string(ns), incarnation, kv_dim, fmt,
                  b = std::move(blocks)](std::span<const uint8_t>) {
      return OnRegister(n, incarnation, kv_dim, fmt, b.get());
    };
    return Status::OK();
  }
  virtual Status ReserveRegisterChild(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                      quant::Format fmt, std::shared_ptr<const BlockTable> blocks,
                                      std::string_view parent_ns, uint64_t parent_incarnation,
                                      PendingRecord* out) {
    out->lsn = 0;
    out->write = [this, n = std::string(ns), incarnation, kv_dim, fmt, b = std::move(blocks),
                  p = std::string(parent_ns), parent_incarnation](std::span<const uint8_t>) {
      return OnRegisterChild(n, incarnation, kv_dim, fmt, b.get(), p, parent_incarnation);
    };
    return Status::OK();
  }
};

}  // namespace pion::store
