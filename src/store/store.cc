#include "store/store.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

#include "base/check.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pion::store {

namespace {

struct Layer {
  uint64_t rows = 0;  // high-water mark: rows [0, rows) exist (unwritten ones read as zeros)
  std::vector<std::shared_ptr<Chunk>> chunks;
};

struct SideData {
  mutable std::mutex mu;
  std::vector<Layer> layers;  // size = highest layer written + 1
  uint64_t total_rows = 0;    // sum of Layer::rows
  // Stores reserve (rows counted in the budget, log record reserved) in one
  // hold of `mu` and apply in a later one, after their record is written; they
  // apply in reservation order (tickets), which is their LSN order.
  std::condition_variable turn;
  uint64_t next_ticket = 0;             // handed out at reservation
  uint64_t applied_ticket = 0;          // every ticket below it has applied or failed
  std::vector<uint64_t> reserved_rows;  // per layer: high-water mark including reservations
  uint64_t reserved_total = 0;          // sum of reserved_rows (>= total_rows)
};

// Encoded rows of the store in progress. Kept per thread so large uploads do
// not fault in fresh pages each time; trimmed after unusually large ones. 16 MiB
// (the encoded form of a 32 MiB f32 fp16 upload) keeps -w 4 within 64 MiB of
// scratch in all, inside product.md's RSS bound (1.25 x stored + 64 MiB).
thread_local std::vector<uint8_t> tl_scratch;
constexpr size_t kScratchKeepBytes = 16u << 20;

}  // namespace

class Namespace {
 public:
  Namespace(std::string n, uint64_t inc, uint32_t d, quant::Format f)
      : name(std::move(n)),
        incarnation(inc),
        dim(d),
        fmt(f),
        row_bytes(quant::RowBytes(f, d)),
        rows_per_chunk(RowsPerChunk(row_bytes)) {}

  const std::string name;
  const uint64_t incarnation;
  const uint32_t dim;
  const quant::Format fmt;
  const size_t row_bytes;
  const uint32_t rows_per_chunk;
  SideData sides[2];
  std::atomic<uint64_t> stamp{0};

  // Guarded by Store::mu_.
  bool dropped = false;
  uint64_t bytes = 0;
  std::shared_ptr<const BlockTable> blocks;
  uint64_t prefill_us = 0;
};

namespace {

// The per-process secret of the block index: from the kernel's random source
// (getrandom via std::random_device) once, on first use.
uint64_t IndexSeed() {
  static const uint64_t seed = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

}  // namespace

size_t BlockTable::Slot(uint64_t h) const {
  return static_cast<size_t>(XXH3_64bits_withSeed(&h, sizeof(h), IndexSeed()) >>
                             (64 - index_bits_));
}

bool BlockTable::Contains(uint64_t h) const {
  if (h == 0) return has_zero_;
  if (index_.empty()) return false;
  const size_t mask = index_.size() - 1;
  size_t i = Slot(h);
  while (true) {
    uint64_t v = index_[i];
    if (v == h) return true;
    if (v == 0) return false;
    i = (i + 1) & mask;
  }
}

std::shared_ptr<const BlockTable> BlockTable::Finished(const persist::BlockRecord& r) {
  auto t = std::make_shared<BlockTable>();
  t->block_size = r.block_size;
  t->hashes = r.hashes;
  t->Finish();
  return t;
}

void BlockTable::Finish() {
  // What is held is what is counted (MemoryBytes). shrink_to_fit() is a no-op
  // in libstdc++ without exceptions, so copy when there is slack.
  if (hashes.capacity() > hashes.size()) hashes = std::vector<uint64_t>(hashes.begin(), hashes.end());
  index_bits_ = 4;
  while ((size_t{1} << index_bits_) < 2 * hashes.size()) ++index_bits_;
  index_.assign(size_t{1} << index_bits_, 0);
  has_zero_ = false;
  build_probes_ = 0;
  const size_t mask = index_.size() - 1;
  for (uint64_t h : hashes) {
    if (h == 0) {
      has_zero_ = true;
      continue;
    }
    size_t i = Slot(h);
    ++build_probes_;
    while (index_[i] != 0 && index_[i] != h) {
      i = (i + 1) & mask;
      ++build_probes_;
    }
    index_[i] = h;
  }
  // Longest run of occupied slots, wrapping around (the table is at most half
  // full, so there is always an empty slot).
  max_run_ = 0;
  size_t first_empty = 0;
  while (index_[first_empty] != 0) ++first_empty;
  uint64_t run = 0;
  for (size_t k = 1; k <= index_.size(); ++k) {
    if (index_[(first_empty + k) & mask] != 0) {
      max_run_ = std::max(max_run_, ++run);
    } else {
      run = 0;
    }
  }
  finished_ = true;
}

Store::Store(StoreConfig cfg) : cfg_(cfg) {}
Store::~Store() = default;

bool Store::ParseSessionId(std::string_view sid, std::string_view* ns, Side* side) {
  if (sid.size() < 4) return false;
  std::string_view suffix = sid.substr(sid.size() - 3);
  if (suffix == "_pk") {
    *side = Side::kKeys;
  } else if (suffix == "_pv") {
    *side = Side::kValues;
  } else {
    return false;
  }
  *ns = sid.substr(0, sid.size() - 3);
  return true;
}

Store::NsPtr Store::Find(std::string_view ns) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = map_.find(ns);
  return it == map_.end() ? nullptr : it->second;
}

void Store::Touch(Namespace& n) {
  n.stamp.store(lru_clock_.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

Store::NsPtr Store::FindAndTouch(std::string_view ns) {
  NsPtr n = Find(ns);
  if (n) Touch(*n);
  return n;
}

Status Store::RemoveLocked(const NsPtr& n, DropReason reason, uint64_t* lsn) {
  if (sink_) {
    auto r = sink_->OnDrop(n->name, n->incarnation, reason);
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  map_.erase(n->name);
  n->dropped = true;
  bytes_ -= n->bytes;
  if (reason == DropReason::kEviction) evictions_ += 2;
  return Status::OK();
}

Status Store::EvictLocked(const Namespace* keep, const std::function<bool()>& fits, uint64_t* lsn) {
  if (fits()) return Status::OK();
  std::vector<std::pair<uint64_t, NsPtr>> order;
  order.reserve(map_.size());
  for (auto& [name, n] : map_)
    if (n.get() != keep) order.emplace_back(n->stamp.load(std::memory_order_relaxed), n);
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [stamp, n] : order) {
    PION_RETURN_IF_ERROR(RemoveLocked(n, DropReason::kEviction, lsn));
    if (fits()) return Status::OK();
  }
  return Status::OutOfBudget("");
}

namespace {

uint64_t TableBytes(const std::shared_ptr<const BlockTable>& t) { return t ? t->MemoryBytes() : 0; }

}  // namespace

Status Store::Register(const RegisterArgs& a, uint64_t* lsn) {
  *lsn = 0;
  if (a.ns.empty() || a.ns.size() > kMaxNamespaceBytes)
    return Status::InvalidArgument("ns_key length must be 1..512");
  if (a.kv_dim < 1 || a.kv_dim > quant::kMaxDim)
    return Status::InvalidArgument("kv_dim out of range (1..16384)");
  if (!quant::DimSupported(a.fmt, a.kv_dim))
    return Status::InvalidArgument("vquant " + std::string(quant::FormatName(a.fmt)) +
                                   " needs kv_dim divisible by 32");
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
  uint64_t inc = 0;
  uint64_t delta = 0;  // bytes the registration adds: its table less a replaced one
  {
    std::shared_lock<std::shared_mutex> gate(gate_);
    std::lock_guard<std::mutex> l(mu_);
    auto it = map_.find(a.ns);
    if (it != map_.end()) {
      existing = it->second;
      Namespace& n = *existing;
      if (n.dim != a.kv_dim || n.fmt != a.fmt) {
        char buf[128];
        std::string_view q = quant::FormatName(n.fmt);
        std::snprintf(buf, sizeof(buf), "namespace already registered with kv_dim %u vquant %.*s",
                      n.dim, static_cast<int>(q.size()), q.data());
        return Status::InvalidArgument(buf);
      }
      inc = n.incarnation;
    } else if (cfg_.max_sessions < 2) {
      return Status::OutOfBudget("");
    }
    // Block tables count in vstore_bytes and against --maxmemory like rows.
    delta = TableBytes(table);
    const uint64_t replaced = existing && table ? TableBytes(existing->blocks) : 0;
    if (cfg_.max_bytes > 0 && delta > replaced) {
      const uint64_t own = existing ? existing->bytes - replaced : 0;
      if (own + delta > cfg_.max_bytes) return Status::OutOfBudget("");
      PION_RETURN_IF_ERROR(EvictLocked(
          existing.get(), [&] { return bytes_ - replaced + delta <= cfg_.max_bytes; }, lsn));
    }
    if (!existing) {
      PION_RETURN_IF_ERROR(EvictLocked(
          nullptr, [&] { return 2 * (map_.size() + 1) <= cfg_.max_sessions; }, lsn));
      inc = next_incarnation_++;
    }
    if (sink_) {
      PION_RETURN_IF_ERROR(sink_->ReserveRegister(a.ns, inc, a.kv_dim, a.fmt, table, &rec));
    }
    // Counted now as if applied (a replaced table's bytes already given back);
    // undone below if the write fails. reg_mu_ keeps `replaced` current.
    delta -= replaced;  // modulo 2^64: may "subtract"
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
        existing->bytes -= delta;
        bytes_ -= delta;
      }
      if (st.ok()) {
        if (table) existing->blocks = std::move(table);
        existing->prefill_us = a.has_prefill ? a.prefill_us : 0;
        Touch(*existing);
      }
    } else if (!st.ok()) {
      bytes_ -= delta;
    } else {
      auto n = std::make_shared<Namespace>(std::string(a.ns), inc, a.kv_dim, a.fmt);
      n->blocks = std::move(table);
      n->bytes = delta;
      n->prefill_us = a.has_prefill ? a.prefill_us : 0;
      Touch(*n);
      map_.emplace(n->name, std::move(n));
    }
  }
  EndPending();
  return st;
}

LookupResult Store::Lookup(std::string_view ns) {
  LookupResult res;
  NsPtr n;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = map_.find(ns);
    if (it == map_.end()) return res;
    n = it->second;
    res.prefill_us = n->prefill_us;
  }
  Touch(*n);
  res.hit = true;
  const SideData& k = n->sides[static_cast<int>(Side::kKeys)];
  std::lock_guard<std::mutex> l(k.mu);
  res.layer0_tokens = k.layers.empty() ? 0 : k.layers[0].rows;
  return res;
}

Result<uint64_t> Store::Drop(std::span<const std::string_view> names, uint64_t* lsn) {
  *lsn = 0;
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  uint64_t dropped = 0;
  for (std::string_view name : names) {
    auto it = map_.find(name);
    if (it == map_.end()) continue;
    NsPtr n = it->second;
    PION_RETURN_IF_ERROR(RemoveLocked(n, DropReason::kDrop, lsn));
    ++dropped;
  }
  return dropped;
}

std::shared_ptr<const BlockTable> Store::Blocks(std::string_view ns) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = map_.find(ns);
  if (it == map_.end()) return nullptr;
  Touch(*it->second);
  const auto& t = it->second->blocks;
  if (!t || t->hashes.empty()) return nullptr;
  return t;
}

Status Store::FlushAll(uint64_t* lsn) {
  *lsn = 0;
  std::lock_guard<std::mutex> reg(reg_mu_);  // not between a registration's log and apply
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  if (sink_) {
    auto r = sink_->OnFlushAll();
    if (!r.ok()) return r.status();
    *lsn = *r;
  }
  for (auto& [name, n] : map_) n->dropped = true;
  map_.clear();
  bytes_ = 0;
  return Status::OK();
}

uint64_t Store::NamespaceCount() const {
  std::lock_guard<std::mutex> l(mu_);
  return map_.size();
}

Status Store::StoreRows(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                        const RowInput& in, uint64_t* lsn) {
  *lsn = 0;
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side)) return Status::NotFound("session not found");
  if (layer >= kMaxLayers) return Status::InvalidArgument("layer out of range (0..255)");
  if (count == 0 || start > kMaxTokens || count > kMaxTokens - start)
    return Status::InvalidArgument("start + count out of range (at most 16777216 tokens)");
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status::NotFound("session not found");
  size_t in_elem = in.type == RowInput::Type::kF32 ? 4 : 2;
  if (in.bytes != count * n->dim * in_elem) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "blob size %zu != expected %llu (count=%llu x kv_dim=%u x %zu)",
                  in.bytes, static_cast<unsigned long long>(count * n->dim * in_elem),
                  static_cast<unsigned long long>(count), n->dim, in_elem);
    return Status::InvalidArgument(buf);
  }
  size_t out_bytes = count * n->row_bytes;
  if (n->fmt == quant::Format::kFp16 && in.type == RowInput::Type::kF16) {
    // F16 rows into an fp16 namespace are already in stored form: no encode copy.
    return StoreEncoded(n, side, layer, start, count,
                        {static_cast<const uint8_t*>(in.data), out_bytes}, true, lsn);
  }
  std::vector<uint8_t>& scratch = tl_scratch;
  if (scratch.size() < out_bytes) scratch.resize(out_bytes);
  Status st = in.type == RowInput::Type::kF32
                  ? quant::EncodeRows(n->fmt, in.data, count, n->dim, scratch.data())
                  : quant::EncodeRowsF16(n->fmt, in.data, count, n->dim, scratch.data());
  if (st.ok())
    st = StoreEncoded(n, side, layer, start, count, {scratch.data(), out_bytes}, true, lsn);
  if (scratch.size() > kScratchKeepBytes) std::vector<uint8_t>().swap(scratch);
  return st;
}

// REQUIRES sd.mu. Copies stored rows into the layer's chunks (copy on write).
static void ApplyRowsLocked(Namespace& n, SideData& sd, uint32_t layer, uint64_t start,
                            uint64_t count, std::span<const uint8_t> stored) {
  const uint64_t end = start + count;
  if (sd.layers.size() <= layer) sd.layers.resize(layer + 1);
  Layer& L = sd.layers[layer];
  const uint64_t old_rows = L.rows;
  const uint64_t new_rows = std::max(old_rows, end);
  const uint32_t R = n.rows_per_chunk;
  const size_t rb = n.row_bytes;
  uint64_t r = start;
  while (r < end) {
    uint64_t ci = r / R;
    uint32_t off = static_cast<uint32_t>(r % R);
    uint32_t run = static_cast<uint32_t>(std::min<uint64_t>(R - off, end - r));
    if (L.chunks.size() <= ci) L.chunks.resize(ci + 1);
    std::shared_ptr<Chunk>& c = L.chunks[ci];
    uint32_t need = off + run;
    if (!c) {
      c = Chunk::Make(GrowCapacity(0, need, R), rb);
    } else if (c->capacity_rows < need) {
      c = c->Clone(GrowCapacity(c->capacity_rows, need, R));
    } else if (c.use_count() > 1) {  // pinned by a fetch or snapshot: copy on write
      c = c->Clone(c->capacity_rows);
    }
    std::memcpy(c->data + static_cast<size_t>(off) * rb, stored.data() + (r - start) * rb,
                static_cast<size_t>(run) * rb);
    r += run;
  }
  sd.total_rows += new_rows - old_rows;
  L.rows = new_rows;
}

void Store::BeginPending() {
  std::lock_guard<std::mutex> l(pending_mu_);
  ++pending_;
}

void Store::EndPending() {
  std::lock_guard<std::mutex> l(pending_mu_);
  if (--pending_ == 0) pending_cv_.notify_all();
}

Status Store::StoreEncoded(const NsPtr& n, Side side, uint32_t layer, uint64_t start,
                           uint64_t count, std::span<const uint8_t> stored, bool log,
                           uint64_t* lsn) {
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
      if (n->dropped) return Status::NotFound("session not found");
      if (delta > 0 && cfg_.max_bytes > 0) {
        if (n->bytes + delta > cfg_.max_bytes) return Status::OutOfBudget("");
        PION_RETURN_IF_ERROR(EvictLocked(
            n.get(), [&] { return bytes_ + delta <= cfg_.max_bytes; }, lsn));
      }
      if (write) {
        PION_RETURN_IF_ERROR(sink_->ReserveStore(n->name, n->incarnation, side, layer, start,
                                                 count, static_cast<uint32_t>(rb), &rec));
      }
      n->bytes += delta;
      bytes_ += delta;
    }
    sd.reserved_rows[layer] = new_rows;
    sd.reserved_total += new_rows - old_rows;
    ticket = sd.next_ticket++;
    BeginPending();
  }
  // Checksum and copy the rows into the log with no store lock held.
  Status st;
  if (write) {
    auto r = rec.write(stored);
    if (r.ok()) {
      *lsn = std::max(*lsn, *r);
    } else {
      st = r.status();
    }
  }
  {
    std::unique_lock<std::mutex> sl(sd.mu);
    sd.turn.wait(sl, [&] { return sd.applied_ticket == ticket; });
    if (st.ok()) ApplyRowsLocked(*n, sd, layer, start, count, stored);
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

// Appends segments covering rows [start, end) of `L` (may be null) to `out`.
void AppendSegments(const Layer* L, uint32_t R, size_t rb, uint64_t start, uint64_t end,
                    std::vector<FetchSegment>* out) {
  auto zeros = [&](uint64_t rows) {
    if (rows == 0) return;
    if (!out->empty() && out->back().data == nullptr) {
      out->back().rows += rows;
    } else {
      out->push_back(FetchSegment{nullptr, nullptr, rows});
    }
  };
  uint64_t r = start;
  while (r < end) {
    if (L == nullptr || r >= L->rows) {
      zeros(end - r);
      return;
    }
    uint64_t ci = r / R;
    uint32_t off = static_cast<uint32_t>(r % R);
    uint64_t run = std::min<uint64_t>(R - off, end - r);
    const std::shared_ptr<Chunk>* c = ci < L->chunks.size() ? &L->chunks[ci] : nullptr;
    uint64_t avail = 0;
    if (c && *c && (*c)->capacity_rows > off)
      avail = std::min<uint64_t>(run, (*c)->capacity_rows - off);
    if (avail > 0)
      out->push_back(FetchSegment{*c, (*c)->data + static_cast<size_t>(off) * rb, avail});
    zeros(run - avail);
    r += run;
  }
}

}  // namespace

Result<FetchPlan> Store::FetchRangeOf(Namespace& n, Side side, uint32_t layer, uint64_t start,
                                      uint64_t end) {
  FetchPlan plan;
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
  if (!ParseSessionId(sid, &ns, &side)) return Status::NotFound("session not found");
  if (end <= start) return Status::InvalidArgument("invalid RANGE: end must exceed start");
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status::NotFound("session not found");
  total_fetches_.fetch_add(end - start, std::memory_order_relaxed);
  return FetchRangeOf(*n, side, layer, start, end);
}

Result<FetchPlan> Store::FetchIds(std::string_view sid, uint32_t layer,
                                  std::span<const uint64_t> ids) {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side)) return Status::NotFound("session not found");
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status::NotFound("session not found");
  total_fetches_.fetch_add(ids.size(), std::memory_order_relaxed);
  FetchPlan plan;
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
  if (!ParseSessionId(sid, &ns, &side)) return Status::NotFound("session not found");
  if (end <= start) return Status::InvalidArgument("invalid range: end must exceed start");
  NsPtr n = FindAndTouch(ns);
  if (!n) return Status::NotFound("session not found");
  const SideData& sd = n->sides[static_cast<int>(side)];
  std::vector<FetchPlan> plans;
  {
    std::lock_guard<std::mutex> l(sd.mu);
    uint32_t L =
        num_layers > 0 ? std::min(num_layers, kMaxLayers) : static_cast<uint32_t>(sd.layers.size());
    if (L == 0) return Status::NotFound("session has no stored layers");
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
  total_fetches_.fetch_add((end - start) * plans.size(), std::memory_order_relaxed);
  return plans;
}

Result<SessionInfo> Store::Info(std::string_view sid) const {
  std::string_view ns;
  Side side;
  if (!ParseSessionId(sid, &ns, &side)) return Status::NotFound("session not found");
  NsPtr n = Find(ns);
  if (!n) return Status::NotFound("session not found");
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
    s.registered_prefixes = map_.size();
    s.sessions = 2 * map_.size();
    s.max_sessions = cfg_.max_sessions;
    s.evictions = evictions_;
    s.bytes = bytes_;
    s.max_bytes = cfg_.max_bytes;
    all.reserve(map_.size());
    for (auto& [name, n] : map_) {
      all.push_back(n);
      s.allocated_bytes += TableBytes(n->blocks);
    }
  }
  s.total_fetches = total_fetches_.load(std::memory_order_relaxed);
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

Status Store::SetMaxBytes(uint64_t max_bytes, uint64_t* lsn) {
  *lsn = 0;
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  cfg_.max_bytes = max_bytes;
  if (max_bytes == 0) return Status::OK();
  return EvictLocked(
      nullptr, [&] { return bytes_ <= max_bytes; }, lsn);
}

uint64_t Store::max_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return cfg_.max_bytes;
}

std::vector<NamespaceView> Store::CaptureSnapshot(const std::function<Status()>& at_barrier,
                                                  Status* barrier_status) {
  std::unique_lock<std::shared_mutex> gate(gate_);
  {
    // Changes reserved before the barrier are in the log before it; wait for
    // them to be written and applied (new ones cannot start: they need the gate).
    std::unique_lock<std::mutex> l(pending_mu_);
    pending_cv_.wait(l, [&] { return pending_ == 0; });
  }
  *barrier_status = at_barrier ? at_barrier() : Status::OK();
  std::vector<NamespaceView> views;
  if (!barrier_status->ok()) return views;
  std::vector<NsPtr> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    all.reserve(map_.size());
    for (auto& [name, n] : map_) all.push_back(n);
    views.resize(all.size());
    for (size_t i = 0; i < all.size(); ++i) views[i].blocks = all[i]->blocks;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    Namespace& n = *all[i];
    NamespaceView& v = views[i];
    v.ns = n.name;
    v.kv_dim = n.dim;
    v.fmt = n.fmt;
    v.incarnation = n.incarnation;
    v.lru_stamp = n.stamp.load(std::memory_order_relaxed);
    for (int side = 0; side < 2; ++side) {
      const SideData& sd = n.sides[side];
      std::lock_guard<std::mutex> l(sd.mu);
      for (uint32_t li = 0; li < sd.layers.size(); ++li) {
        const Layer& L = sd.layers[li];
        if (L.rows == 0) continue;
        NamespaceView::LayerView lv;
        lv.layer = li;
        lv.rows = L.rows;
        AppendSegments(&L, n.rows_per_chunk, n.row_bytes, 0, L.rows, &lv.segments);
        v.layers[side].push_back(std::move(lv));
      }
    }
  }
  // Oldest first, so a loader that replays in order restores the LRU order.
  std::sort(views.begin(), views.end(), [](const NamespaceView& a, const NamespaceView& b) {
    return a.lru_stamp < b.lru_stamp;
  });
  return views;
}

Status Store::ApplyRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                            quant::Format fmt, const persist::BlockRecord* blocks) {
  if (ns.empty() || ns.size() > kMaxNamespaceBytes || kv_dim < 1 || kv_dim > quant::kMaxDim ||
      !quant::DimSupported(fmt, kv_dim))
    return Status::Corruption("register record with invalid namespace, kv_dim or format");
  std::shared_ptr<const BlockTable> table;
  if (blocks) table = BlockTable::Finished(*blocks);
  std::lock_guard<std::mutex> l(mu_);
  next_incarnation_ = std::max(next_incarnation_, incarnation + 1);
  // Replay never refuses what was logged; it evicts as the live server did
  // (a smaller --maxmemory than before the restart evicts more).
  auto fit_bytes = [&](const Namespace* keep, uint64_t add) {
    if (cfg_.max_bytes == 0) return;
    uint64_t unused = 0;
    (void)EvictLocked(keep, [&] { return bytes_ + add <= cfg_.max_bytes; }, &unused);
  };
  auto it = map_.find(ns);
  if (it != map_.end()) {
    NsPtr n = it->second;
    if (n->incarnation == incarnation && n->dim == kv_dim && n->fmt == fmt) {
      if (table) {
        uint64_t old = TableBytes(n->blocks), add = TableBytes(table);
        n->bytes -= old;
        bytes_ -= old;
        fit_bytes(n.get(), add);
        n->bytes += add;
        bytes_ += add;
        n->blocks = std::move(table);
      }
      Touch(*n);
      return Status::OK();
    }
    uint64_t unused = 0;
    PION_RETURN_IF_ERROR(RemoveLocked(n, DropReason::kDrop, &unused));
  }
  uint64_t unused = 0;
  PION_RETURN_IF_ERROR(EvictLocked(
      nullptr, [&] { return 2 * (map_.size() + 1) <= std::max<uint64_t>(cfg_.max_sessions, 2); },
      &unused));
  fit_bytes(nullptr, TableBytes(table));
  auto n = std::make_shared<Namespace>(std::string(ns), incarnation, kv_dim, fmt);
  n->blocks = std::move(table);
  n->bytes = TableBytes(n->blocks);
  bytes_ += n->bytes;
  Touch(*n);
  map_.emplace(n->name, std::move(n));
  return Status::OK();
}

Status Store::ApplyStored(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                          uint64_t start, uint64_t count, std::span<const uint8_t> stored) {
  NsPtr n = Find(ns);
  if (!n || n->incarnation != incarnation) return Status::NotFound("namespace not present");
  if (layer >= kMaxLayers || count == 0 || start > kMaxTokens || count > kMaxTokens - start ||
      stored.size() != count * n->row_bytes)
    return Status::Corruption("store record does not match its namespace");
  Touch(*n);
  uint64_t unused = 0;
  return StoreEncoded(n, side, layer, start, count, stored, false, &unused);
}

void Store::ApplyDrop(std::string_view ns, uint64_t incarnation) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = map_.find(ns);
  if (it == map_.end() || it->second->incarnation != incarnation) return;
  NsPtr n = it->second;
  uint64_t unused = 0;
  Status st = RemoveLocked(n, DropReason::kDrop, &unused);
  PION_CHECK(st.ok());
}

void Store::ApplyFlushAll() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [name, n] : map_) n->dropped = true;
  map_.clear();
  bytes_ = 0;
}

void Store::SetLruStamp(std::string_view ns, uint64_t stamp) {
  NsPtr n = Find(ns);
  if (!n) return;
  n->stamp.store(stamp, std::memory_order_relaxed);
  uint64_t cur = lru_clock_.load(std::memory_order_relaxed);
  while (cur < stamp && !lru_clock_.compare_exchange_weak(cur, stamp)) {
  }
}

}  // namespace pion::store
