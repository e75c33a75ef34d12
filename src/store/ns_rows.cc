// A namespace's rows: store (encode into chunks, log, charge the budget) and
// fetch plans (which chunk bytes answer a range or a set of ids), and the session
// summary. The registry, lookups and drops are in store.cc.
#include <algorithm>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "store/layer_rows.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

namespace {

// Encoded rows of the partial chunks at either end of the store in progress
// (whole chunks are encoded in place): at most 2 chunks' worth, kept per thread
// so that small uploads do not fault in fresh pages each time.
thread_local std::vector<uint8_t> tl_scratch;
thread_local std::vector<RowPiece> tl_pieces;  // the pieces of the store in progress

}  // namespace

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
    base::ReaderLock gate(&gate_);
    base::MutexLock sl(&sd.mu);
    if (sd.reserved_rows.size() <= layer) sd.reserved_rows.resize(layer + 1, 0);
    const uint64_t old_rows = sd.reserved_rows[layer];
    const uint64_t new_rows = std::max(old_rows, end);
    const uint64_t delta = (new_rows - old_rows) * rb;
    {
      base::MutexLock l(&mu_);
      if (n->dropped)
        return Status(Code::kNotFound, Reason::kSessionNotFound, {}, "session not found");
      if (delta > 0 && cfg_.max_bytes > 0) {
        if (n->bytes + delta > cfg_.max_bytes) return Status::OutOfBudget("");
        PION_RETURN_IF_ERROR(EvictLocked(
            n.get(), [&]() REQUIRES(mu_) { return bytes_ + delta <= cfg_.max_bytes; }, lsn));
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
    base::MutexLock sl(&sd.mu);
    while (sd.applied_ticket != ticket) sd.turn.Wait(sd.mu);
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
      base::MutexLock l(&mu_);
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
  base::MutexLock l(&sd.mu);
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
  base::MutexLock l(&sd.mu);
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
    base::MutexLock l(&sd.mu);
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
  base::MutexLock l(&sd.mu);
  info.num_layers = static_cast<uint32_t>(sd.layers.size());
  for (const Layer& L : sd.layers) info.layer_tokens.push_back(L.rows);
  info.total_tokens = sd.total_rows;
  info.bytes = sd.total_rows * n->row_bytes;
  return info;
}

}  // namespace pion::store
