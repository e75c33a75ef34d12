// Writing a namespace's rows: the checks every writer makes (a store's
// arguments, a stored-rows record, a fetch's range), and the write of a single
// caller into a namespace no store holds (the module's value). A store's own
// write (budget, log, turns among concurrent writers) is Slice::WriteRows
// (store/ns_rows.cc); both apply through Namespace::ApplyPiecesLocked and the
// side's reservation turns, so the side's bookkeeping is the same either way.
#include <utility>
#include <vector>

#include "base/check.h"
#include "store/namespace.h"

namespace pion::store {

namespace {

// The pieces of the write in progress (Namespace::EncodeRows), kept per thread
// so that a small upload allocates nothing.
thread_local std::vector<RowPiece> tl_unshared_pieces;

// One write's reservation, apply and end of turn in one hold of the side lock.
void ApplyUnshared(Namespace& n, Side s, uint32_t layer, uint64_t end,
                   std::span<const RowPiece> pieces) {
  SideData& sd = n.side(s);
  base::MutexLock l(&sd.mu);
  const uint64_t ticket = sd.ReserveLocked(layer, end);
  while (sd.applied_ticket != ticket) sd.turn.Wait(sd.mu);
  n.ApplyPiecesLocked(sd, layer, pieces, nullptr);
  sd.EndTurnLocked();  // nothing failed: nothing to give back
  sd.turn.SignalAll();
}

}  // namespace

void AssertStoreArgs([[maybe_unused]] uint32_t layer, [[maybe_unused]] uint64_t start,
                     [[maybe_unused]] uint64_t count) {
  PION_DCHECK(layer < kMaxLayers);
  PION_DCHECK(count != 0 && start <= kMaxTokens && count <= kMaxTokens - start);
}

Status CheckStoredArgs(const Namespace& n, uint32_t layer, uint64_t start, uint64_t count,
                       size_t bytes) {
  if (layer >= kMaxLayers || count == 0 || start > kMaxTokens || count > kMaxTokens - start ||
      bytes != count * n.row_bytes)
    return Status::Corruption("store record does not match its namespace");
  return Status::OK();
}

Status StoreRowsUnshared(Namespace& n, Side s, uint32_t layer, uint64_t start, uint64_t count,
                         const RowInput& in) {
  AssertStoreArgs(layer, start, count);
  std::vector<RowPiece>& pieces = tl_unshared_pieces;
  Status st = n.EncodeRows(start, count, in, &pieces);
  if (st.ok()) ApplyUnshared(n, s, layer, start + count, pieces);
  pieces.clear();  // drops this thread's references to the chunks now
  return st;
}

Status ApplyStoredUnshared(Namespace& n, Side s, uint32_t layer, uint64_t start, uint64_t count,
                           std::span<const uint8_t> stored) {
  PION_RETURN_IF_ERROR(CheckStoredArgs(n, layer, start, count, stored.size()));
  const RowPiece one{start, count, stored.data(), nullptr};
  ApplyUnshared(n, s, layer, start + count, {&one, 1});
  return Status::OK();
}

}  // namespace pion::store
