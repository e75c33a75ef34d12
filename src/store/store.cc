#include "store/store.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "store/layer_rows.h"
#include "store/namespace.h"

namespace pion::store {

Store::Store(StoreConfig cfg) : cfg_(cfg) {}
Store::~Store() { DetachTier(); }

NsPtr Store::Find(std::string_view ns) const {
  const Shard& sh = ks_.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  auto it = sh.map.find(ns);
  return it == sh.map.end() ? nullptr : it->second;
}

const NsPtr* Store::NsRefLocked(std::string_view ns) const {
  const Shard& sh = ks_.ShardFor(ns);
  auto it = ks_.MapOf(sh).find(ns);
  return it == ks_.MapOf(sh).end() ? nullptr : &it->second;
}

Namespace* Store::NsFindLocked(std::string_view ns) const {
  const NsPtr* p = NsRefLocked(ns);
  return p != nullptr ? p->get() : nullptr;
}

uint64_t Store::NsCountLocked() const {
  uint64_t n = 0;
  for (const Shard& sh : ks_.shards()) n += ks_.MapOf(sh).size();
  return n;
}

uint64_t Store::StrCountLocked() const {
  uint64_t n = 0;
  for (const Shard& sh : ks_.shards()) n += ks_.StringsOf(sh).size();
  return n;
}

bool Store::IsNamespaceKeyShared(std::string_view key) const {
  {
    const Shard& sh = ks_.ShardFor(key);
    base::MutexLock l(&sh.mu);
    if (sh.map.find(key) != sh.map.end()) return true;
  }
  std::string_view ns;
  Side side;
  if (!ParseSessionId(key, &ns, &side)) return false;
  const Shard& sh = ks_.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  return sh.map.find(ns) != sh.map.end();
}

NsPtr Store::FindAndTouch(std::string_view ns) {
  NsPtr n = Find(ns);
  if (n) Touch(*n);
  return n;
}

Status Store::Register(const RegisterArgs& a, uint64_t* lsn) {
  *lsn = 0;
  // The grammar (kvproto ParseRegister) has checked the arguments; asserted here.
  AssertRegisterArgs(a);
  // The table is built (and its index finished) before any lock is taken.
  std::shared_ptr<const BlockTable> table = RegisteredTable(a);
  // Registrations (and FLUSHALL) are serialised by reg_mu_, held while the
  // record is written, so that no other change to the namespace map can come
  // between this one's log position and its apply; ks_.mu is held only to
  // reserve and to apply.
  base::MutexLock reg(&reg_mu_);
  PendingRecord rec;
  NsPtr existing;
  NsPtr parent;  // of a new namespace registered with PARENT
  uint64_t inc = 0;
  uint64_t delta = 0;  // bytes the registration adds: its table less a replaced one
  {
    base::ReaderLock gate(&gate_);
    base::MutexLock l(&ks_.mu);
    // One key space: a string key of this name (or of one of its session ids) wins.
    if (ks_.FindStringLocked(a.ns) || ks_.FindStringLocked(std::string(a.ns) + "_pk") ||
        ks_.FindStringLocked(std::string(a.ns) + "_pv"))
      return Status::WrongType();
    if (const NsPtr* it = NsRefLocked(a.ns)) {
      existing = *it;
      PION_RETURN_IF_ERROR(CheckReregister(*existing, a));
      inc = existing->incarnation;
    } else {
      if (!a.parent.empty()) {
        const NsPtr* pit = NsRefLocked(a.parent);
        if (pit == nullptr)
          return Status(Code::kInvalidArgument, Reason::kParentNotFound, {},
                        "parent not registered");
        parent = *pit;
        if (parent->dim != a.kv_dim)
          return Status(Code::kInvalidArgument, Reason::kParentDim, {parent->dim}, "parent kv_dim");
        if (parent->depth + 2 > cfg_.max_chain)
          return Status(Code::kInvalidArgument, Reason::kChainTooLong, {cfg_.max_chain},
                        "chain too long");
      }
      if (cfg_.max_sessions < 2) return Status::OutOfBudget("");
    }
    // Block tables count in vstore_bytes and against --maxmemory like rows.
    delta = TableBytes(table);
    const uint64_t replaced = existing && table ? TableBytes(existing->blocks) : 0;
    if (cfg_.max_bytes > 0 && delta > replaced) {
      const uint64_t own = existing ? existing->bytes - replaced : 0;
      if (own + delta > cfg_.max_bytes) return Status::OutOfBudget("");
      // A new child never evicts its parent (nor, so, any ancestor).
      PION_RETURN_IF_ERROR(EvictLocked(
          existing ? existing.get() : parent.get(),
          [&]() REQUIRES(ks_.mu) { return bytes_ - replaced + delta <= cfg_.max_bytes; }, lsn));
    }
    if (!existing) {
      PION_RETURN_IF_ERROR(EvictNamespacesLocked(
          parent.get(),
          [&]() REQUIRES(ks_.mu) { return 2 * (NsCountLocked() + 1) <= cfg_.max_sessions; }, lsn));
      inc = next_incarnation_++;
    }
    if (sink_) {
      // The hashes (the body) are written from `table`, alive until then.
      persist::RegisterRec r{.ns = a.ns, .incarnation = inc, .kv_dim = a.kv_dim, .fmt = a.fmt};
      if (table) persist::CarryBlocks(*table, &r);
      if (parent) r.parent = parent->name, r.parent_incarnation = parent->incarnation;
      PION_RETURN_IF_ERROR(sink_->Reserve(r, &rec).status());
    }
    // Until it applies, the child keeps its parent from being evicted.
    if (parent) ++parent->pending_children;
    // Counted now as if applied (a replaced table's bytes already given back);
    // undone below if the write fails. reg_mu_ keeps `replaced` current.
    delta -= replaced;  // modulo 2^64: may "subtract"
    if (existing) UntierNamespaceLocked(*existing);
    bytes_ += delta;
    if (existing) existing->bytes += delta;
    BeginPending();
  }
  // Checksum and write the record (up to 8 MiB of hashes) with only reg_mu_ held.
  Status st;
  if (sink_) {
    std::span<const uint8_t> body;
    if (table)
      body = {reinterpret_cast<const uint8_t*>(table->hashes.data()), table->hashes.size() * 8};
    auto r = rec.write(body);
    if (r.ok()) {
      *lsn = std::max(*lsn, *r);
    } else {
      st = r.status();
    }
  }
  {
    base::MutexLock l(&ks_.mu);
    if (existing) {
      // A drop or eviction meanwhile (logged after this record) took the
      // namespace's bytes out of the total already.
      if (!st.ok() && !existing->dropped) {
        UntierNamespaceLocked(*existing);
        existing->bytes -= delta;
        bytes_ -= delta;
      }
      if (st.ok()) {
        if (block_observer_ && table) ReportTableReplaced(*existing, *table);
        Shard& sh = ks_.ShardFor(existing->name);
        base::MutexLock sl(&sh.mu);  // Lookup and Blocks read these
        SetRegistration(*existing, std::move(table), a);
        Touch(*existing);
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
        bytes_ -= delta;
      } else {
        if (block_observer_ && table && !table->hashes.empty())
          block_observer_->OnBlocksStored(*table, LastHash(parent.get()));
        NsPtr n = NewNamespace(a, inc, parent, std::move(table));
        n->bytes = delta;
        if (parent) parent->children.push_back(n.get());
        Touch(*n);
        Shard& sh = ks_.ShardFor(n->name);
        base::MutexLock sl(&sh.mu);
        sh.map.emplace(n->name, std::move(n));
      }
    }
  }
  EndPending();
  return st;
}

std::vector<ChainSegment> Store::LookupChain(std::string_view ns) {
  std::vector<ChainSegment> chain;
  NsPtr n = Find(ns);
  if (!n) return chain;
  Touch(*n);
  chain.resize(n->depth + 1);
  size_t i = chain.size();
  for (Namespace* p = n.get(); p != nullptr; p = p->parent.get()) {
    ChainSegment& seg = chain[--i];
    seg.ns = p->name;
    {
      const Shard& sh = ks_.ShardFor(p->name);
      base::MutexLock l(&sh.mu);
      seg.prefill_us = p->prefill_us;
    }
    const SideData& k = p->sides[static_cast<int>(Side::kKeys)];
    base::MutexLock l(&k.mu);
    seg.tokens = k.layers.empty() ? 0 : k.layers[0].rows;
  }
  return chain;
}

bool Store::Describe(std::string_view ns, NamespaceInfo* out) const {
  NsPtr n;
  {
    base::MutexLock l(&ks_.mu);
    const NsPtr* it = NsRefLocked(ns);
    if (it == nullptr) return false;
    n = *it;
    out->children = n->children.size();
    out->on_disk = n->tiered;
  }
  DescribeChain(*n, out);
  return true;
}

LookupResult Store::Lookup(std::string_view ns) {
  LookupResult res;
  // Only the shard's lock (never a side lock under it: a store holds side ->
  // ks_.mu -> shard); the key side's layer-0 row count is its atomic mirror, so
  // no side lock and no reference to the namespace are needed.
  const Shard& sh = ks_.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  auto it = sh.map.find(ns);
  if (it == sh.map.end()) return res;
  res = LookupOf(*it->second);
  Touch(*it->second);
  return res;
}

Status Store::AskSubtrees(std::vector<const Namespace*> todo,
                          const std::function<bool(std::string_view ns)>& may_drop) {
  while (!todo.empty()) {
    const Namespace* n = todo.back();
    todo.pop_back();
    if (!may_drop(n->name))
      return Status(Code::kInvalidArgument, Reason::kDropRefused, {}, "drop refused");
    todo.insert(todo.end(), n->children.begin(), n->children.end());
  }
  return Status::OK();
}

Result<uint64_t> Store::Drop(std::span<const std::string_view> names, uint64_t* lsn,
                             const std::function<bool(std::string_view ns)>& may_drop) {
  *lsn = 0;
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  if (may_drop) {
    // Every namespace of every subtree, before the first removal.
    std::vector<const Namespace*> todo;
    for (std::string_view name : names)
      if (const Namespace* n = NsFindLocked(name)) todo.push_back(n);
    if (Status s = AskSubtrees(std::move(todo), may_drop); !s.ok()) return s;
  }
  uint64_t dropped = 0;
  for (std::string_view name : names) {
    const NsPtr* it = NsRefLocked(name);
    if (it == nullptr) continue;
    NsPtr n = *it;
    PION_RETURN_IF_ERROR(RemoveSubtreeLocked(n, DropReason::kDrop, lsn, &dropped));
  }
  return dropped;
}

const std::shared_ptr<const BlockTable>* Store::BlocksLocked(const Shard& sh, std::string_view ns) {
  auto it = sh.map.find(ns);
  if (it == sh.map.end()) return nullptr;
  Touch(*it->second);
  return NonEmptyBlocks(*it->second);
}

std::shared_ptr<const BlockTable> Store::Blocks(std::string_view ns) {
  const Shard& sh = ks_.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  const auto* t = BlocksLocked(sh, ns);
  return t ? *t : nullptr;
}

bool Store::WithBlocks(std::string_view ns, const std::function<void(const BlockTable&)>& fn) {
  const Shard& sh = ks_.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  const auto* t = BlocksLocked(sh, ns);
  if (t == nullptr) return false;
  fn(**t);
  return true;
}

Status Store::FlushAll(uint64_t* lsn) {
  *lsn = 0;
  base::MutexLock reg(&reg_mu_);  // not between a registration's log and apply
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  if (sink_) {
    auto r = sink_->Log(persist::FlushAllRec{});
    if (!r.ok()) return r.status();
    *lsn = *r;
  }
  ClearAllLocked();
  return Status::OK();
}

void Store::ClearAllLocked() {
  if (observer_) observer_->OnFlushAll();
  if (block_observer_) block_observer_->OnAllBlocksCleared();
  for (Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    for (auto& [name, n] : sh.map) {
      n->dropped = true;
      n->children.clear();
    }
    sh.map.clear();
  }
  ClearStringsLocked();
  bytes_ = 0;
}

std::vector<std::string> Store::NamespaceNames() const {
  base::MutexLock l(&ks_.mu);
  std::vector<std::string> out;
  out.reserve(NsCountLocked());
  for (const Shard& sh : ks_.shards())
    for (const auto& kv : ks_.MapOf(sh)) out.emplace_back(kv.first);
  return out;
}

std::optional<uint64_t> Store::LastHash(const Namespace* n) {
  if (n == nullptr || !n->blocks || n->blocks->hashes.empty()) return std::nullopt;
  return n->blocks->hashes.back();
}

void Store::ReportTableReplaced(const Namespace& n, const BlockTable& fresh) {
  if (n.blocks && !n.blocks->hashes.empty()) block_observer_->OnBlocksRemoved(*n.blocks);
  if (!fresh.hashes.empty()) block_observer_->OnBlocksStored(fresh, LastHash(n.parent.get()));
}

std::vector<ResidentTable> Store::ResidentBlockTables() const {
  base::MutexLock l(&ks_.mu);
  std::vector<std::pair<uint32_t, ResidentTable>> found;
  for (const Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    for (const auto& kv : sh.map) {
      const Namespace& n = *kv.second;
      if (n.blocks && !n.blocks->hashes.empty())
        found.push_back({n.depth, ResidentTable{n.blocks, LastHash(n.parent.get())}});
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ResidentTable> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

uint64_t Store::NamespaceCount() const {
  base::MutexLock l(&ks_.mu);
  return NsCountLocked();
}

StoreStats Store::Stats() const {
  StoreStats s;
  std::vector<NsPtr> all;
  {
    base::MutexLock l(&ks_.mu);
    s.registered_prefixes = NsCountLocked();
    s.sessions = 2 * s.registered_prefixes;
    s.max_sessions = cfg_.max_sessions;
    s.evictions = evictions_;
    s.bytes = bytes_ + tier_uncharged_;  // held, in RAM or on disk
    s.max_bytes = cfg_.max_bytes;
    all.reserve(s.registered_prefixes);
    for (const Shard& sh : ks_.shards())
      for (auto& [name, n] : ks_.MapOf(sh)) {
        all.push_back(n);
        if (n->parent) ++s.linked_prefixes;
        s.allocated_bytes += TableBytes(n->blocks);
      }
  }
  s.total_fetches = total_fetches_.Sum();
  for (const NsPtr& n : all) {
    const RowTally t = TallyRows(*n);
    s.total_tokens += t.rows;
    s.total_prefix_tokens += t.prefix_tokens;
    s.allocated_bytes += t.chunk_bytes;
  }
  return s;
}

}  // namespace pion::store
