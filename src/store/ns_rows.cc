// The keyspace's write of a namespace's rows (Slice::WriteRows): charge the
// budget, reserve the log record, write it with no store lock held and apply
// the rows in reservation order. The operations that call it (V.STORE*,
// V.FETCH*, V.INFO) are store/prefix_rows.cc; what the rows are - the argument
// checks, encoding, chunks, fetch plans - is the value's own
// (store/namespace.cc, store/ns_write.cc).
#include <algorithm>
#include <utility>

#include "base/check.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

Status Store::StoreEncoded(const NsPtr& n, Side side, uint32_t layer, uint64_t start,
                           uint64_t count, std::span<const uint8_t> stored, bool log, uint64_t* lsn,
                           const std::shared_ptr<const void>* backing) {
  const RowPiece one{start, count, stored.data(), nullptr};
  return StorePieces(n, side, layer, start, count, {&one, 1}, log, lsn, backing);
}

Status Store::StorePieces(const NsPtr& n, Side side, uint32_t layer, uint64_t start, uint64_t count,
                          std::span<const RowPiece> pieces, bool log, uint64_t* lsn,
                          const std::shared_ptr<const void>* backing) {
  SideData& sd = n->sides[static_cast<int>(side)];
  const uint64_t end = start + count;
  const size_t rb = n->row_bytes;
  PendingRecord rec;
  const bool write = log && sink_ != nullptr;
  uint64_t ticket;
  {
    // Reserve: budget and log position, under the gate (a snapshot waits for
    // pending stores, see CaptureSnapshot) and the side lock (fixes the order).
    base::ReaderLock gate(&gate_);
    base::MutexLock sl(&sd.mu);
    const uint64_t delta = sd.ReserveGrowthLocked(layer, end) * rb;
    {
      base::MutexLock l(&ks_.mu);
      if (n->dropped)
        return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
      if (delta > 0 && cfg_.max_bytes > 0) {
        if (n->bytes + delta > cfg_.max_bytes) return Status::OutOfBudget("");
        PION_RETURN_IF_ERROR(EvictLocked(
            n.get(), [&]() REQUIRES(ks_.mu) { return bytes_ + delta <= cfg_.max_bytes; }, lsn));
      }
      if (write) {
        const persist::StoreRec r{n->name, n->incarnation,           side, layer, start,
                                  count,   static_cast<uint32_t>(rb)};
        PION_RETURN_IF_ERROR(sink_->Reserve(r, &rec).status());
      }
      UntierNamespaceLocked(*n);
      n->bytes += delta;
      bytes_ += delta;
    }
    ticket = sd.ReserveLocked(layer, end);
    BeginPending();
  }
  // Checksum and copy the rows into the log with no store lock held, from
  // the pieces' own bytes (the fresh chunks, the received buffer).
  Status st;
  if (write) {
    Result<uint64_t> r = uint64_t{0};
    if (pieces.size() == 1) {
      r = rec.write({pieces[0].data, pieces[0].count * rb});
    } else if (rec.write_parts) {
      std::vector<std::span<const uint8_t>> parts;
      parts.reserve(pieces.size());
      for (const RowPiece& p : pieces) parts.push_back({p.data, p.count * rb});
      r = rec.write_parts(parts);
    } else {
      std::vector<uint8_t> body;  // a sink without piecewise writes
      body.reserve(count * rb);
      for (const RowPiece& p : pieces) body.insert(body.end(), p.data, p.data + p.count * rb);
      r = rec.write(body);
    }
    if (r.ok()) {
      *lsn = std::max(*lsn, *r);
    } else {
      st = r.status();
    }
  }
  {
    base::MutexLock sl(&sd.mu);
    while (sd.applied_ticket != ticket) sd.turn.Wait(sd.mu);
    if (st.ok()) n->ApplyPiecesLocked(sd, layer, pieces, backing);
    // A failed reservation's rows, given back once nothing on the side is pending.
    if (const uint64_t over = sd.EndTurnLocked() * rb; over > 0) {
      base::MutexLock l(&ks_.mu);
      if (!n->dropped) {
        n->bytes -= over;
        bytes_ -= over;
      }
    }
    sd.turn.SignalAll();
  }
  EndPending();
  return st;
}

}  // namespace pion::store
