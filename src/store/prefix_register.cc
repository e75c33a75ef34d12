// KV.PREFIX.REGISTER (store/prefix_ops.h): a new namespace, or a new block
// table and prefill time for a registered one.
//
// Registrations (and FLUSHALL) are serialised by the registry lock, held while
// the record is written, so that no other change to the namespace map comes
// between this one's log position and its apply; ks.mu is held only to
// reserve and to apply. The table (and its index) is built before any lock is
// taken, and its hashes (up to 8 MiB) are written to the log with only the
// registry lock held.
#include <algorithm>
#include <utility>

#include "base/mutex.h"
#include "store/namespace.h"
#include "store/prefix_ops.h"

namespace pion::store {

namespace {

bool StringHoldsName(const Keyspace& ks, std::string_view ns) REQUIRES(ks.mu) {
  std::string sid(ns);
  if (ks.FindStringLocked(sid)) return true;
  sid += "_pk";
  if (ks.FindStringLocked(sid)) return true;
  sid.back() = 'v';
  return ks.FindStringLocked(sid) != nullptr;
}

}  // namespace

Status OpRegister(const OpArgs& op, const RegisterArgs& a) {
  *op.lsn = 0;
  const Slice& s = op.slice;
  // The grammar (kvproto ParseRegister) has checked the arguments; asserted here.
  AssertRegisterArgs(a);
  std::shared_ptr<const BlockTable> table = RegisteredTable(a);
  base::MutexLock reg(&s.registry_mu());
  PendingRecord rec;
  NsPtr existing;
  NsPtr parent;  // of a new namespace registered with PARENT
  uint64_t inc = 0;
  uint64_t delta = 0;  // bytes the registration adds: its table less a replaced one
  {
    base::ReaderLock gate(&s.gate());
    base::MutexLock l(&s.ks.mu);
    // One key space: a string key of this name (or of one of its session ids) wins.
    if (StringHoldsName(s.ks, a.ns)) return Status::WrongType();
    const StoreConfig& cfg = s.ConfigLocked();
    if (const NsPtr* it = s.NamespaceRefLocked(a.ns)) {
      existing = *it;
      PION_RETURN_IF_ERROR(CheckReregister(*existing, a));
      inc = existing->incarnation;
    } else {
      if (!a.parent.empty()) {
        const NsPtr* pit = s.NamespaceRefLocked(a.parent);
        if (pit == nullptr)
          return Status(Code::kInvalidArgument, Reason::kParentNotFound, {},
                        "parent not registered");
        parent = *pit;
        if (parent->dim != a.kv_dim)
          return Status(Code::kInvalidArgument, Reason::kParentDim, {parent->dim}, "parent kv_dim");
        if (parent->depth + 2 > cfg.max_chain)
          return Status(Code::kInvalidArgument, Reason::kChainTooLong, {cfg.max_chain},
                        "chain too long");
      }
      if (cfg.max_sessions < 2) return Status::OutOfBudget("");
    }
    // Block tables count in vstore_bytes and against --maxmemory like rows.
    delta = TableBytes(table);
    const uint64_t replaced = existing && table ? TableBytes(existing->blocks) : 0;
    if (cfg.max_bytes > 0 && delta > replaced) {
      const uint64_t own = existing ? existing->bytes - replaced : 0;
      if (own + delta > cfg.max_bytes) return Status::OutOfBudget("");
      // A new child never evicts its parent (nor, so, any ancestor).
      PION_RETURN_IF_ERROR(s.EvictLocked(
          existing ? existing.get() : parent.get(),
          [&]() REQUIRES(s.ks.mu) { return s.ChargedLocked() - replaced + delta <= cfg.max_bytes; },
          op.lsn));
    }
    if (!existing) {
      PION_RETURN_IF_ERROR(s.EvictNamespacesLocked(
          parent.get(),
          [&]()
              REQUIRES(s.ks.mu) { return 2 * (s.NamespaceCountLocked() + 1) <= cfg.max_sessions; },
          op.lsn));
      inc = s.NextIncarnationLocked();
    }
    if (s.logging()) {
      // The hashes (the body) are written from `table`, alive until then.
      persist::RegisterRec r{.ns = a.ns, .incarnation = inc, .kv_dim = a.kv_dim, .fmt = a.fmt};
      if (table) persist::CarryBlocks(*table, &r);
      if (parent) r.parent = parent->name, r.parent_incarnation = parent->incarnation;
      PION_RETURN_IF_ERROR(s.ReserveLocked(r, &rec));
    }
    // Until it applies, the child keeps its parent from being evicted.
    if (parent) ++parent->pending_children;
    // Counted now as if applied (a replaced table's bytes already given back);
    // undone below if the write fails. The registry lock keeps `replaced` current.
    delta -= replaced;  // modulo 2^64: may "subtract"
    if (existing) s.UntierLocked(*existing);
    s.ChargeLocked(existing.get(), delta);
    s.BeginPending();
  }
  // Checksum and write the record with only the registry lock held.
  Status st;
  if (s.logging()) {
    std::span<const uint8_t> body;
    if (table)
      body = {reinterpret_cast<const uint8_t*>(table->hashes.data()), table->hashes.size() * 8};
    auto r = rec.write(body);
    if (r.ok()) {
      *op.lsn = std::max(*op.lsn, *r);
    } else {
      st = r.status();
    }
  }
  {
    base::MutexLock l(&s.ks.mu);
    if (existing) {
      // A drop or eviction meanwhile (logged after this record) took the
      // namespace's bytes out of the total already.
      if (!st.ok() && !existing->dropped) {
        s.UntierLocked(*existing);
        s.ChargeLocked(existing.get(), -delta);
      }
      if (st.ok()) {
        if (table) s.ReportTableReplacedLocked(*existing, *table);
        Shard& sh = s.ks.ShardFor(existing->name);
        base::MutexLock sl(&sh.mu);  // OpLookup and OpBlocks read these
        SetRegistration(*existing, std::move(table), a);
        s.Touch(*existing);
      }
    } else {
      if (parent) {
        --parent->pending_children;
        // A DROP of the parent came between the reservation and now: its drop
        // is logged after this registration, and replay drops this child with
        // the parent's subtree, so it is not created here either.
        if (st.ok() && parent->dropped)
          st = Status(Code::kInvalidArgument, Reason::kParentNotFound, {}, "parent dropped");
      }
      if (!st.ok()) {
        s.ChargeLocked(nullptr, -delta);
      } else {
        if (table) s.ReportTableStoredLocked(*table, parent.get());
        NsPtr n = NewNamespace(a, inc, parent, std::move(table));
        n->bytes = delta;
        if (parent) parent->children.push_back(n.get());
        s.Touch(*n);
        s.InsertLocked(std::move(n));
      }
    }
  }
  s.EndPending();
  return st;
}

}  // namespace pion::store
