// The store's side of a namespace's rows: V.STORE* (find the namespace, charge
// the budget, log, apply in reservation order) and V.FETCH* / V.INFO (find,
// check the disk tier, count). What the rows are - the argument checks,
// encoding, chunks, fetch plans - is the value's own (store/namespace.cc,
// store/ns_write.cc). The registry, lookups and drops are in store.cc.
#include <algorithm>
#include <utility>

#include "base/check.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

namespace {

// The pieces of the store in progress (Namespace::EncodeRows), kept per thread
// so that a small upload allocates nothing.
thread_local std::vector<RowPiece> tl_pieces;

}  // namespace

Status Store::StoreRows(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                        const RowInput& in, uint64_t* lsn) {
  *lsn = 0;
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side))
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  // The grammar (kvproto ParseStoreBatch) has checked the layer and the token range.
  AssertStoreArgs(layer, start, count);
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  std::vector<RowPiece>& pieces = tl_pieces;
  Status st = n->EncodeRows(start, count, in, &pieces);
  if (st.ok()) st = StorePieces(n, side, layer, start, count, pieces, true, lsn, nullptr);
  pieces.clear();  // drops this thread's references to the chunks now
  return st;
}

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

Result<FetchPlan> Store::FetchRange(std::string_view sid, uint32_t layer, uint64_t start,
                                    uint64_t end) {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side))
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  PION_DCHECK(start < end);  // the grammar's RANGE check
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  if (NeedsTierCheck(*n)) PION_RETURN_IF_ERROR(CheckTieredNamespace(n));
  total_fetches_.Add(end - start);
  return n->PlanRange(side, layer, start, end);
}

Result<FetchPlan> Store::FetchIds(std::string_view sid, uint32_t layer,
                                  std::span<const uint64_t> ids) {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side))
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  if (NeedsTierCheck(*n)) PION_RETURN_IF_ERROR(CheckTieredNamespace(n));
  total_fetches_.Add(ids.size());
  return n->PlanIds(side, layer, ids);
}

Result<std::vector<FetchPlan>> Store::FetchBatch(std::string_view sid, uint64_t start, uint64_t end,
                                                 uint32_t num_layers) {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side))
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  PION_DCHECK(start < end);  // the grammar's BATCH range check
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  if (NeedsTierCheck(*n)) PION_RETURN_IF_ERROR(CheckTieredNamespace(n));
  Result<std::vector<FetchPlan>> plans = n->PlanLayers(side, start, end, num_layers);
  if (plans.ok()) total_fetches_.Add((end - start) * plans->size());
  return plans;
}

Result<SessionInfo> Store::Info(std::string_view sid) const {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side))
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  NsPtr n = Find(ns);
  if (!n) return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  return n->Describe(side);
}

}  // namespace pion::store
