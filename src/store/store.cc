#include "store/store.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "store/layer_rows.h"
#include "store/namespace.h"

namespace pion::store {

namespace {

// Encoded rows of the partial chunks at either end of the store in progress
// (whole chunks are encoded in place): at most 2 chunks' worth, kept per thread
// so that small uploads do not fault in fresh pages each time.
thread_local std::vector<uint8_t> tl_scratch;
thread_local std::vector<RowPiece> tl_pieces;  // the pieces of the store in progress

}  // namespace

Store::Store(StoreConfig cfg) : cfg_(cfg) {}
Store::~Store() { DetachTier(); }

Store::NsPtr Store::Find(std::string_view ns) const {
  const Shard& sh = ShardFor(ns);
  std::lock_guard<std::mutex> l(sh.mu);
  auto it = sh.map.find(ns);
  return it == sh.map.end() ? nullptr : it->second;
}

const Store::NsPtr* Store::NsRefLocked(std::string_view ns) const {
  const Shard& sh = ShardFor(ns);
  auto it = sh.map.find(ns);
  return it == sh.map.end() ? nullptr : &it->second;
}

Namespace* Store::NsFindLocked(std::string_view ns) const {
  const NsPtr* p = NsRefLocked(ns);
  return p != nullptr ? p->get() : nullptr;
}

uint64_t Store::NsCountLocked() const {
  uint64_t n = 0;
  for (const Shard& sh : shards_) n += sh.map.size();
  return n;
}

uint64_t Store::StrCountLocked() const {
  uint64_t n = 0;
  for (const Shard& sh : shards_) n += sh.strings.size();
  return n;
}

bool Store::IsNamespaceKeyShared(std::string_view key) const {
  {
    const Shard& sh = ShardFor(key);
    std::lock_guard<std::mutex> l(sh.mu);
    if (sh.map.find(key) != sh.map.end()) return true;
  }
  std::string_view ns;
  Side side;
  if (!ParseSessionId(key, &ns, &side)) return false;
  const Shard& sh = ShardFor(ns);
  std::lock_guard<std::mutex> l(sh.mu);
  return sh.map.find(ns) != sh.map.end();
}

Store::NsPtr Store::FindAndTouch(std::string_view ns) {
  NsPtr n = Find(ns);
  if (n) Touch(*n);
  return n;
}

Status Store::Register(const RegisterArgs& a, uint64_t* lsn) {
  *lsn = 0;
  if (a.ns.empty() || a.ns.size() > kMaxNamespaceBytes)
    return Status(Code::kInvalidArgument, Reason::kNsKeyLength, {}, "ns_key length must be 1..512");
  if (a.kv_dim < 1 || a.kv_dim > quant::kMaxDim)
    return Status(Code::kInvalidArgument, Reason::kKvDimRange, {},
                  "kv_dim out of range (1..16384)");
  if (!quant::DimSupported(a.fmt, a.kv_dim))
    return Status(
        Code::kInvalidArgument, Reason::kDimUnsupported, {static_cast<int>(a.fmt)},
        "vquant " + std::string(quant::FormatName(a.fmt)) + " needs kv_dim divisible by 32");
  // The table is built (and its index finished) before any lock is taken.
  std::shared_ptr<const BlockTable> table = a.blocks;
  if (table && !table->finished()) table = BlockTable::Finished(*table);
  // Registrations (and FLUSHALL) are serialised by reg_mu_, held while the
  // record is written, so that no other change to the namespace map can come
  // between this one's log position and its apply; mu_ is held only to
  // reserve and to apply.
  std::lock_guard<std::mutex> reg(reg_mu_);
  PendingRecord rec;
  NsPtr existing;
  NsPtr parent;  // of a new namespace registered with PARENT
  uint64_t inc = 0;
  uint64_t delta = 0;  // bytes the registration adds: its table less a replaced one
  {
    std::shared_lock<std::shared_mutex> gate(gate_);
    std::lock_guard<std::mutex> l(mu_);
    // One key space: a string key of this name (or of one of its session ids) wins.
    if (StrEntryLocked(a.ns) || StrEntryLocked(std::string(a.ns) + "_pk") ||
        StrEntryLocked(std::string(a.ns) + "_pv"))
      return Status::WrongType();
    if (const NsPtr* it = NsRefLocked(a.ns)) {
      existing = *it;
      Namespace& n = *existing;
      if (n.dim != a.kv_dim || n.fmt != a.fmt) {
        char buf[128];
        std::string_view q = quant::FormatName(n.fmt);
        std::snprintf(buf, sizeof(buf), "namespace already registered with kv_dim %u vquant %.*s",
                      n.dim, static_cast<int>(q.size()), q.data());
        return Status(Code::kInvalidArgument, Reason::kRegisteredOther,
                      {n.dim, static_cast<int>(n.fmt)}, buf);
      }
      // The link is fixed at creation: PARENT, when given, must repeat it.
      if (!a.parent.empty() && (!n.parent || n.parent->name != a.parent))
        return Status(Code::kInvalidArgument, Reason::kParentMismatch, {}, "parent mismatch")
            .WithName(n.parent ? n.parent->name : "");
      inc = n.incarnation;
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
          [&] { return bytes_ - replaced + delta <= cfg_.max_bytes; }, lsn));
    }
    if (!existing) {
      PION_RETURN_IF_ERROR(EvictNamespacesLocked(
          parent.get(), [&] { return 2 * (NsCountLocked() + 1) <= cfg_.max_sessions; }, lsn));
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
    std::lock_guard<std::mutex> l(mu_);
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
        Shard& sh = ShardFor(existing->name);
        std::lock_guard<std::mutex> sl(sh.mu);  // Lookup and Blocks read these
        if (table) existing->blocks = std::move(table);
        existing->prefill_us = a.has_prefill ? a.prefill_us : 0;
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
        auto n = std::make_shared<Namespace>(std::string(a.ns), inc, a.kv_dim, a.fmt, parent);
        if (block_observer_ && table && !table->hashes.empty())
          block_observer_->OnBlocksStored(*table, LastHash(parent.get()));
        n->blocks = std::move(table);
        n->bytes = delta;
        n->prefill_us = a.has_prefill ? a.prefill_us : 0;
        if (parent) parent->children.push_back(n.get());
        Touch(*n);
        Shard& sh = ShardFor(n->name);
        std::lock_guard<std::mutex> sl(sh.mu);
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
      const Shard& sh = ShardFor(p->name);
      std::lock_guard<std::mutex> l(sh.mu);
      seg.prefill_us = p->prefill_us;
    }
    const SideData& k = p->sides[static_cast<int>(Side::kKeys)];
    std::lock_guard<std::mutex> l(k.mu);
    seg.tokens = k.layers.empty() ? 0 : k.layers[0].rows;
  }
  return chain;
}

bool Store::Describe(std::string_view ns, NamespaceInfo* out) const {
  NsPtr n;
  {
    std::lock_guard<std::mutex> l(mu_);
    const NsPtr* it = NsRefLocked(ns);
    if (it == nullptr) return false;
    n = *it;
    out->children = n->children.size();
    out->on_disk = n->tiered;
  }
  out->parent = n->parent ? n->parent->name : std::string();
  out->depth = n->depth;
  out->chain_length = n->depth + 1;
  out->chain_tokens = 0;
  for (const Namespace* p = n.get(); p != nullptr; p = p->parent.get()) {
    const SideData& k = p->sides[static_cast<int>(Side::kKeys)];
    std::lock_guard<std::mutex> l(k.mu);
    uint64_t t = k.layers.empty() ? 0 : k.layers[0].rows;
    if (p == n.get()) out->tokens = t;
    out->chain_tokens += t;
  }
  return true;
}

LookupResult Store::Lookup(std::string_view ns) {
  LookupResult res;
  // Only the shard's lock (never a side lock under it: a store holds side ->
  // mu_ -> shard); the key side's layer-0 row count is its atomic mirror, so
  // no side lock and no reference to the namespace are needed.
  const Shard& sh = ShardFor(ns);
  std::lock_guard<std::mutex> l(sh.mu);
  auto it = sh.map.find(ns);
  if (it == sh.map.end()) return res;
  const Namespace& n = *it->second;
  res.prefill_us = n.prefill_us;
  Touch(*it->second);
  res.hit = true;
  res.layer0_tokens =
      n.sides[static_cast<int>(Side::kKeys)].layer0_rows.load(std::memory_order_relaxed);
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
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
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
  const auto& t = it->second->blocks;
  if (!t || t->hashes.empty()) return nullptr;
  return &t;
}

std::shared_ptr<const BlockTable> Store::Blocks(std::string_view ns) {
  const Shard& sh = ShardFor(ns);
  std::lock_guard<std::mutex> l(sh.mu);
  const auto* t = BlocksLocked(sh, ns);
  return t ? *t : nullptr;
}

bool Store::WithBlocks(std::string_view ns, const std::function<void(const BlockTable&)>& fn) {
  const Shard& sh = ShardFor(ns);
  std::lock_guard<std::mutex> l(sh.mu);
  const auto* t = BlocksLocked(sh, ns);
  if (t == nullptr) return false;
  fn(**t);
  return true;
}

Status Store::FlushAll(uint64_t* lsn) {
  *lsn = 0;
  std::lock_guard<std::mutex> reg(reg_mu_);  // not between a registration's log and apply
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
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
  for (Shard& sh : shards_) {
    std::lock_guard<std::mutex> sl(sh.mu);
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
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  out.reserve(NsCountLocked());
  for (const Shard& sh : shards_)
    for (const auto& kv : sh.map) out.emplace_back(kv.first);
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
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<uint32_t, ResidentTable>> found;
  for (const Shard& sh : shards_) {
    std::lock_guard<std::mutex> sl(sh.mu);
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
  std::lock_guard<std::mutex> l(mu_);
  return NsCountLocked();
}

Status Store::StoreRows(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                        const RowInput& in, uint64_t* lsn) {
  *lsn = 0;
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side))
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  if (layer >= kMaxLayers)
    return Status(Code::kInvalidArgument, Reason::kLayerRange, {layer},
                  "layer out of range (0..255)");
  if (count == 0 || start > kMaxTokens || count > kMaxTokens - start)
    return Status(Code::kInvalidArgument, Reason::kTokenRange, {start, count},
                  "start + count out of range (at most 16777216 tokens)");
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  size_t in_elem = in.type == RowInput::Type::kF32 ? 4 : 2;
  if (in.bytes != count * n->dim * in_elem) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "blob size %zu != expected %llu (count=%llu x kv_dim=%u x %zu)",
                  in.bytes, static_cast<unsigned long long>(count * n->dim * in_elem),
                  static_cast<unsigned long long>(count), n->dim, in_elem);
    return Status(Code::kInvalidArgument, Reason::kSizeMismatch, {in.bytes, count, n->dim, in_elem},
                  buf);
  }
  // One pass per stored byte: rows are split at chunk boundaries;
  // every whole chunk is encoded (or copied, or for F16 rows into an fp16
  // namespace, taken by reference from the received buffer) straight into a
  // fresh chunk nobody else sees yet, which the apply step swaps in and the
  // log writes from; only the partial chunks at either end go through scratch
  // (encoded) or are read from the input itself (F16 into fp16).
  const bool same = n->fmt == quant::Format::kFp16 && in.type == RowInput::Type::kF16;
  const size_t rb = n->row_bytes;
  const size_t in_row = static_cast<size_t>(n->dim) * in_elem;
  const uint32_t R = n->rows_per_chunk;
  const uint64_t end = start + count;
  const auto* src = static_cast<const uint8_t*>(in.data);
  std::vector<uint8_t>& scratch = tl_scratch;
  if (!same) {
    const size_t partial = static_cast<size_t>(std::min<uint64_t>(count, 2 * uint64_t{R})) * rb;
    if (scratch.size() < partial) scratch.resize(partial);
  }
  std::vector<RowPiece>& pieces = tl_pieces;
  pieces.clear();
  size_t sp = 0;
  Status st;
  for (uint64_t r = start; r < end && st.ok();) {
    const uint32_t off = static_cast<uint32_t>(r % R);
    const uint64_t run = std::min<uint64_t>(R - off, end - r);
    const uint8_t* in_p = src + (r - start) * in_row;
    uint8_t* dst = nullptr;
    if (off == 0 && run == R) {
      std::shared_ptr<Chunk> c;
      if (same && in.owner != nullptr && reinterpret_cast<uintptr_t>(in_p) % kChunkAlign == 0) {
        c = Chunk::Borrow(in_p, R, rb, in.owner);  // the received bytes are the chunk
      } else {
        c = Chunk::MakeUninit(R, rb);
        const size_t full = static_cast<size_t>(R) * rb;
        std::memset(c->data + full, 0, Chunk::AllocBytes(R, rb) - full);  // alignment padding
        dst = c->data;
      }
      pieces.push_back(RowPiece{r, run, c->data, std::move(c)});
    } else if (same) {
      pieces.push_back(RowPiece{r, run, in_p, nullptr});
    } else {
      dst = scratch.data() + sp;
      sp += run * rb;
      pieces.push_back(RowPiece{r, run, dst, nullptr});
    }
    if (dst != nullptr) {
      if (same)
        std::memcpy(dst, in_p, run * rb);
      else
        st = in.type == RowInput::Type::kF32 ? quant::EncodeRows(n->fmt, in_p, run, n->dim, dst)
                                             : quant::EncodeRowsF16(n->fmt, in_p, run, n->dim, dst);
    }
    r += run;
  }
  if (!st.ok() && pieces.size() > 1) {
    // The row an error names counts from the first row of the store: encode
    // the whole input again for the message (error path only).
    std::vector<uint8_t> whole(count * rb);
    st = in.type == RowInput::Type::kF32
             ? quant::EncodeRows(n->fmt, in.data, count, n->dim, whole.data())
             : quant::EncodeRowsF16(n->fmt, in.data, count, n->dim, whole.data());
    PION_CHECK(!st.ok());
  }
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
    std::shared_lock<std::shared_mutex> gate(gate_);
    std::lock_guard<std::mutex> sl(sd.mu);
    if (sd.reserved_rows.size() <= layer) sd.reserved_rows.resize(layer + 1, 0);
    const uint64_t old_rows = sd.reserved_rows[layer];
    const uint64_t new_rows = std::max(old_rows, end);
    const uint64_t delta = (new_rows - old_rows) * rb;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (n->dropped)
        return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
      if (delta > 0 && cfg_.max_bytes > 0) {
        if (n->bytes + delta > cfg_.max_bytes) return Status::OutOfBudget("");
        PION_RETURN_IF_ERROR(EvictLocked(
            n.get(), [&] { return bytes_ + delta <= cfg_.max_bytes; }, lsn));
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
    sd.reserved_rows[layer] = new_rows;
    sd.reserved_total += new_rows - old_rows;
    ticket = sd.next_ticket++;
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
    std::unique_lock<std::mutex> sl(sd.mu);
    sd.turn.wait(sl, [&] { return sd.applied_ticket == ticket; });
    if (st.ok()) {
      for (const RowPiece& p : pieces) {
        if (p.chunk != nullptr)
          InstallChunkLocked(*n, sd, layer, p.start / n->rows_per_chunk, p.chunk);
        else
          ApplyRowsLocked(*n, sd, layer, p.start, p.count, {p.data, p.count * rb}, backing);
      }
    }
    ++sd.applied_ticket;
    if (sd.applied_ticket == sd.next_ticket && sd.reserved_total != sd.total_rows) {
      // Nothing pending on this side and some reservation failed: give back
      // the rows it counted.
      uint64_t over = (sd.reserved_total - sd.total_rows) * rb;
      sd.reserved_rows.resize(sd.layers.size());
      for (size_t i = 0; i < sd.layers.size(); ++i) sd.reserved_rows[i] = sd.layers[i].rows;
      sd.reserved_total = sd.total_rows;
      std::lock_guard<std::mutex> l(mu_);
      if (!n->dropped) {
        n->bytes -= over;
        bytes_ -= over;
      }
    }
    sd.turn.notify_all();
  }
  EndPending();
  return st;
}

namespace {
constexpr size_t kCachedSegmentVectors = 4;
constexpr size_t kMaxCachedSegmentCapacity = 64;
thread_local std::vector<std::vector<FetchSegment>> t_segment_vectors;
}  // namespace

std::vector<FetchSegment> TakeSegmentVector() {
  if (t_segment_vectors.empty()) return {};
  std::vector<FetchSegment> v = std::move(t_segment_vectors.back());
  t_segment_vectors.pop_back();
  return v;
}

void RecycleSegmentVector(std::vector<FetchSegment>&& v) {
  if (v.capacity() == 0 || v.capacity() > kMaxCachedSegmentCapacity) return;
  if (t_segment_vectors.size() >= kCachedSegmentVectors) return;
  v.clear();  // releases the pins now
  if (t_segment_vectors.capacity() < kCachedSegmentVectors)
    t_segment_vectors.reserve(kCachedSegmentVectors);
  t_segment_vectors.push_back(std::move(v));
}

Result<FetchPlan> Store::FetchRangeOf(Namespace& n, Side side, uint32_t layer, uint64_t start,
                                      uint64_t end) {
  FetchPlan plan;
  plan.segments = TakeSegmentVector();
  plan.fmt = n.fmt;
  plan.dim = n.dim;
  plan.row_bytes = n.row_bytes;
  plan.rows = end - start;
  const SideData& sd = n.sides[static_cast<int>(side)];
  std::lock_guard<std::mutex> l(sd.mu);
  const Layer* L = layer < sd.layers.size() ? &sd.layers[layer] : nullptr;
  if (L) {
    uint64_t hi = std::min(end, L->rows);
    plan.stored_rows = hi > start ? hi - start : 0;
  }
  AppendSegments(L, n.rows_per_chunk, n.row_bytes, start, end, &plan.segments);
  return plan;
}

Result<FetchPlan> Store::FetchRange(std::string_view sid, uint32_t layer, uint64_t start,
                                    uint64_t end) {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side))
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  if (end <= start)
    return Status(Code::kInvalidArgument, Reason::kFetchRangeOrder, {start, end},
                  "invalid RANGE: end must exceed start");
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  if (NeedsTierCheck(*n)) PION_RETURN_IF_ERROR(CheckTieredNamespace(n));
  total_fetches_.Add(end - start);
  return FetchRangeOf(*n, side, layer, start, end);
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
  FetchPlan plan;
  plan.segments = TakeSegmentVector();
  plan.fmt = n->fmt;
  plan.dim = n->dim;
  plan.row_bytes = n->row_bytes;
  plan.rows = ids.size();
  const SideData& sd = n->sides[static_cast<int>(side)];
  std::lock_guard<std::mutex> l(sd.mu);
  const Layer* L = layer < sd.layers.size() ? &sd.layers[layer] : nullptr;
  for (uint64_t id : ids) {
    if (L && id < L->rows) ++plan.stored_rows;
    if (id >= kMaxTokens) {
      AppendSegments(nullptr, n->rows_per_chunk, n->row_bytes, 0, 1, &plan.segments);
      continue;
    }
    AppendSegments(L, n->rows_per_chunk, n->row_bytes, id, id + 1, &plan.segments);
  }
  return plan;
}

Result<std::vector<FetchPlan>> Store::FetchBatch(std::string_view sid, uint64_t start, uint64_t end,
                                                 uint32_t num_layers) {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side))
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  if (end <= start)
    return Status(Code::kInvalidArgument, Reason::kBatchRangeOrder, {start, end},
                  "invalid range: end must exceed start");
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  if (NeedsTierCheck(*n)) PION_RETURN_IF_ERROR(CheckTieredNamespace(n));
  const SideData& sd = n->sides[static_cast<int>(side)];
  std::vector<FetchPlan> plans;
  {
    std::lock_guard<std::mutex> l(sd.mu);
    uint32_t L =
        num_layers > 0 ? std::min(num_layers, kMaxLayers) : static_cast<uint32_t>(sd.layers.size());
    if (L == 0)
      return Status(Code::kNotFound, Reason::kNothingStored, {}, "session has no stored layers");
    plans.resize(L);
    for (uint32_t i = 0; i < L; ++i) {
      FetchPlan& p = plans[i];
      p.fmt = n->fmt;
      p.dim = n->dim;
      p.row_bytes = n->row_bytes;
      p.rows = end - start;
      const Layer* lay = i < sd.layers.size() ? &sd.layers[i] : nullptr;
      if (lay) {
        uint64_t hi = std::min(end, lay->rows);
        p.stored_rows = hi > start ? hi - start : 0;
      }
      AppendSegments(lay, n->rows_per_chunk, n->row_bytes, start, end, &p.segments);
    }
  }
  total_fetches_.Add((end - start) * plans.size());
  return plans;
}

Result<SessionInfo> Store::Info(std::string_view sid) const {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side))
    return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  NsPtr n = Find(ns);
  if (!n) return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
  SessionInfo info;
  info.dim = n->dim;
  info.fmt = n->fmt;
  const SideData& sd = n->sides[static_cast<int>(side)];
  std::lock_guard<std::mutex> l(sd.mu);
  info.num_layers = static_cast<uint32_t>(sd.layers.size());
  for (const Layer& L : sd.layers) info.layer_tokens.push_back(L.rows);
  info.total_tokens = sd.total_rows;
  info.bytes = sd.total_rows * n->row_bytes;
  return info;
}

StoreStats Store::Stats() const {
  StoreStats s;
  std::vector<NsPtr> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    s.registered_prefixes = NsCountLocked();
    s.sessions = 2 * s.registered_prefixes;
    s.max_sessions = cfg_.max_sessions;
    s.evictions = evictions_;
    s.bytes = bytes_ + tier_uncharged_;  // held, in RAM or on disk
    s.max_bytes = cfg_.max_bytes;
    all.reserve(s.registered_prefixes);
    for (const Shard& sh : shards_)
      for (auto& [name, n] : sh.map) {
        all.push_back(n);
        if (n->parent) ++s.linked_prefixes;
        s.allocated_bytes += TableBytes(n->blocks);
      }
  }
  s.total_fetches = total_fetches_.Sum();
  for (const NsPtr& n : all) {
    for (int side = 0; side < 2; ++side) {
      const SideData& sd = n->sides[side];
      std::lock_guard<std::mutex> l(sd.mu);
      s.total_tokens += sd.total_rows;
      for (const Layer& L : sd.layers)
        for (const auto& c : L.chunks)
          if (c) s.allocated_bytes += c->bytes();
      if (side == 0 && !sd.layers.empty()) s.total_prefix_tokens += sd.layers[0].rows;
    }
  }
  return s;
}

}  // namespace pion::store
