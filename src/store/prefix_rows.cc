// The rows' operations (store/prefix_ops.h): V.STORE* (find the namespace,
// encode with no lock held, then the keyspace's write: Slice::WriteRows) and
// V.FETCH* / V.INFO (find, check the disk tier, count, plan).
#include <utility>
#include <vector>

#include "base/check.h"
#include "store/namespace.h"
#include "store/prefix_ops.h"

namespace pion::store {

namespace {

// The pieces of the store in progress (Namespace::EncodeRows), kept per thread
// so that a small upload allocates nothing.
thread_local std::vector<RowPiece> tl_pieces;

Status SessionNotFound() {
  return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
}

// The namespace and side a session id names (touched in the LRU when
// `touch`); kSessionNotFound for a malformed id or an unknown namespace.
Status FindSession(const Slice& s, std::string_view sid, bool touch, NsPtr* n, Side* side) {
  std::string_view ns;
  if (!ParseSessionId(sid, &ns, side)) return SessionNotFound();
  *n = touch ? s.FindAndTouch(ns) : s.Find(ns);
  return *n ? Status::OK() : SessionNotFound();
}

// FindSession with the LRU touch, then the disk tier's check of a tiered
// namespace (a fetch's first steps).
Status FindForFetch(const Slice& s, std::string_view sid, NsPtr* n, Side* side) {
  PION_RETURN_IF_ERROR(FindSession(s, sid, true, n, side));
  return s.CheckTier(*n);
}

}  // namespace

Status OpStoreRows(const OpArgs& op, std::string_view sid, uint32_t layer, uint64_t start,
                   uint64_t count, const RowInput& in) {
  *op.lsn = 0;
  // The grammar (kvproto ParseStoreBatch) has checked the layer and the token range.
  AssertStoreArgs(layer, start, count);
  NsPtr n;
  Side side;
  PION_RETURN_IF_ERROR(FindSession(op.slice, sid, true, &n, &side));
  std::vector<RowPiece>& pieces = tl_pieces;
  Status st = n->EncodeRows(start, count, in, &pieces);
  if (st.ok()) st = op.slice.WriteRows(n, side, layer, start, count, pieces, op.lsn);
  pieces.clear();  // drops this thread's references to the chunks now
  return st;
}

Result<FetchPlan> OpFetchRange(const OpArgs& op, std::string_view sid, uint32_t layer,
                               uint64_t start, uint64_t end) {
  PION_DCHECK(start < end);  // the grammar's RANGE check
  NsPtr n;
  Side side;
  PION_RETURN_IF_ERROR(FindForFetch(op.slice, sid, &n, &side));
  op.slice.CountFetches(end - start);
  return n->PlanRange(side, layer, start, end);
}

Result<FetchPlan> OpFetchIds(const OpArgs& op, std::string_view sid, uint32_t layer,
                             std::span<const uint64_t> ids) {
  NsPtr n;
  Side side;
  PION_RETURN_IF_ERROR(FindForFetch(op.slice, sid, &n, &side));
  op.slice.CountFetches(ids.size());
  return n->PlanIds(side, layer, ids);
}

Result<std::vector<FetchPlan>> OpFetchBatch(const OpArgs& op, std::string_view sid, uint64_t start,
                                            uint64_t end, uint32_t num_layers) {
  PION_DCHECK(start < end);  // the grammar's BATCH range check
  NsPtr n;
  Side side;
  PION_RETURN_IF_ERROR(FindForFetch(op.slice, sid, &n, &side));
  Result<std::vector<FetchPlan>> plans = n->PlanLayers(side, start, end, num_layers);
  if (plans.ok()) op.slice.CountFetches((end - start) * plans->size());
  return plans;
}

Result<SessionInfo> OpSessionInfo(const OpArgs& op, std::string_view sid) {
  NsPtr n;
  Side side;
  PION_RETURN_IF_ERROR(FindSession(op.slice, sid, false, &n, &side));
  return n->Describe(side);
}

}  // namespace pion::store
