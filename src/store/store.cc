#include "store/store.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/check.h"

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
};

// Encoded rows of the store in progress. Kept per thread so large uploads do
// not fault in fresh pages each time; trimmed after unusually large ones.
thread_local std::vector<uint8_t> tl_scratch;
constexpr size_t kScratchKeepBytes = 64u << 20;

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

void BlockTable::Finish() {
  index_bits_ = 4;
  while ((size_t{1} << index_bits_) < 2 * hashes.size()) ++index_bits_;
  index_.assign(size_t{1} << index_bits_, 0);
  has_zero_ = false;
  const size_t mask = index_.size() - 1;
  for (uint64_t h : hashes) {
    if (h == 0) {
      has_zero_ = true;
      continue;
    }
    size_t i = Slot(h);
    while (index_[i] != 0 && index_[i] != h) i = (i + 1) & mask;
    index_[i] = h;
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

Status Store::Register(const RegisterArgs& a, uint64_t* lsn) {
  *lsn = 0;
  if (a.ns.empty() || a.ns.size() > kMaxNamespaceBytes)
    return Status::InvalidArgument("ns_key length must be 1..512");
  if (a.kv_dim < 1 || a.kv_dim > quant::kMaxDim)
    return Status::InvalidArgument("kv_dim out of range (1..16384)");
  if (!quant::DimSupported(a.fmt, a.kv_dim))
    return Status::InvalidArgument("vquant " + std::string(quant::FormatName(a.fmt)) +
                                   " needs kv_dim divisible by 32");
  std::shared_lock<std::shared_mutex> gate(gate_);
  std::lock_guard<std::mutex> l(mu_);
  std::shared_ptr<const BlockTable> table;
  if (a.blocks) {
    auto t = std::make_shared<BlockTable>(*a.blocks);
    if (!t->finished()) t->Finish();
    table = std::move(t);
  }
  auto it = map_.find(a.ns);
  if (it != map_.end()) {
    Namespace& n = *it->second;
    if (n.dim != a.kv_dim || n.fmt != a.fmt) {
      char buf[128];
      std::string_view q = quant::FormatName(n.fmt);
      std::snprintf(buf, sizeof(buf), "namespace already registered with kv_dim %u vquant %.*s",
                    n.dim, static_cast<int>(q.size()), q.data());
      return Status::InvalidArgument(buf);
    }
    if (sink_) {
      auto r = sink_->OnRegister(n.name, n.incarnation, n.dim, n.fmt, a.blocks);
      if (!r.ok()) return r.status();
      *lsn = std::max(*lsn, *r);
    }
    if (table) n.blocks = std::move(table);
    n.prefill_us = a.has_prefill ? a.prefill_us : 0;
    Touch(n);
    return Status::OK();
  }
  if (cfg_.max_sessions < 2) return Status::OutOfBudget("");
  PION_RETURN_IF_ERROR(EvictLocked(
      nullptr, [&] { return 2 * (map_.size() + 1) <= cfg_.max_sessions; }, lsn));
  uint64_t inc = next_incarnation_++;
  if (sink_) {
    auto r = sink_->OnRegister(a.ns, inc, a.kv_dim, a.fmt, a.blocks);
    if (!r.ok()) return r.status();
    *lsn = std::max(*lsn, *r);
  }
  auto n = std::make_shared<Namespace>(std::string(a.ns), inc, a.kv_dim, a.fmt);
  n->blocks = std::move(table);
  n->prefill_us = a.has_prefill ? a.prefill_us : 0;
  Touch(*n);
  map_.emplace(n->name, std::move(n));
  return Status::OK();
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

Status Store::StoreEncoded(const NsPtr& n, Side side, uint32_t layer, uint64_t start,
                           uint64_t count, std::span<const uint8_t> stored, bool log,
                           uint64_t* lsn) {
  std::shared_lock<std::shared_mutex> gate(gate_);
  SideData& sd = n->sides[static_cast<int>(side)];
  std::lock_guard<std::mutex> sl(sd.mu);
  const uint64_t end = start + count;
  const uint64_t old_rows = layer < sd.layers.size() ? sd.layers[layer].rows : 0;
  const uint64_t new_rows = std::max(old_rows, end);
  const uint64_t delta = (new_rows - old_rows) * n->row_bytes;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (n->dropped) return Status::NotFound("session not found");
    if (delta > 0 && cfg_.max_bytes > 0) {
      if (n->bytes + delta > cfg_.max_bytes) return Status::OutOfBudget("");
      PION_RETURN_IF_ERROR(EvictLocked(
          n.get(), [&] { return bytes_ + delta <= cfg_.max_bytes; }, lsn));
    }
    n->bytes += delta;
    bytes_ += delta;
  }
  if (log && sink_) {
    auto r = sink_->OnStore(n->name, n->incarnation, side, layer, start, count, stored);
    if (!r.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      if (!n->dropped) {
        n->bytes -= delta;
        bytes_ -= delta;
      }
      return r.status();
    }
    *lsn = std::max(*lsn, *r);
  }
  if (sd.layers.size() <= layer) sd.layers.resize(layer + 1);
  Layer& L = sd.layers[layer];
  const uint32_t R = n->rows_per_chunk;
  const size_t rb = n->row_bytes;
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
  return Status::OK();
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
    for (auto& [name, n] : map_) all.push_back(n);
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
                            quant::Format fmt, const BlockTable* blocks) {
  if (ns.empty() || ns.size() > kMaxNamespaceBytes || kv_dim < 1 || kv_dim > quant::kMaxDim ||
      !quant::DimSupported(fmt, kv_dim))
    return Status::Corruption("register record with invalid namespace, kv_dim or format");
  std::lock_guard<std::mutex> l(mu_);
  next_incarnation_ = std::max(next_incarnation_, incarnation + 1);
  std::shared_ptr<const BlockTable> table;
  if (blocks) {
    auto t = std::make_shared<BlockTable>(*blocks);
    if (!t->finished()) t->Finish();
    table = std::move(t);
  }
  auto it = map_.find(ns);
  if (it != map_.end()) {
    NsPtr n = it->second;
    if (n->incarnation == incarnation && n->dim == kv_dim && n->fmt == fmt) {
      if (table) n->blocks = std::move(table);
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
  auto n = std::make_shared<Namespace>(std::string(ns), incarnation, kv_dim, fmt);
  n->blocks = std::move(table);
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
