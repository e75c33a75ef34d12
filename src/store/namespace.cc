// The prefix value's row operations: encoding a store's rows into chunk-sized
// pieces, applying them (and a side's reservation turns), planning fetches and
// describing a side. The rows' operations (store/prefix_rows.cc) find the
// namespace, and the keyspace (Slice::WriteRows) charges the budget, logs the
// rows and orders the writes; nothing here touches the store.
#include "store/namespace.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "store/layer_rows.h"

namespace pion::store {

namespace {

// Encoded rows of the partial chunks at either end of the store in progress
// (whole chunks are encoded in place): at most 2 chunks' worth, kept per thread
// so that small uploads do not fault in fresh pages each time.
thread_local std::vector<uint8_t> tl_scratch;

// The segment vectors TakeSegmentVector hands out (store_types.h).
constexpr size_t kCachedSegmentVectors = 4;
constexpr size_t kMaxCachedSegmentCapacity = 64;
thread_local std::vector<std::vector<FetchSegment>> t_segment_vectors;

// Rows [start, end) of `layer` (none yet: zeros) into `p`: how many of them are
// stored, and the segments that answer them.
void PlanLayerRange(const Namespace& n, const SideData& sd, uint32_t layer, uint64_t start,
                    uint64_t end, FetchPlan* p) REQUIRES(sd.mu) {
  const Layer* L = layer < sd.layers.size() ? &sd.layers[layer] : nullptr;
  if (L) {
    const uint64_t hi = std::min(end, L->rows);
    p->stored_rows = hi > start ? hi - start : 0;
  }
  AppendSegments(L, n.rows_per_chunk, n.row_bytes, start, end, &p->segments);
}

}  // namespace

Status Namespace::EncodeRows(uint64_t start, uint64_t count, const RowInput& in,
                             std::vector<RowPiece>* pieces) const {
  pieces->clear();
  const size_t in_elem = in.type == RowInput::Type::kF32 ? 4 : 2;
  if (in.bytes != count * dim * in_elem) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "blob size %zu != expected %llu (count=%llu x kv_dim=%u x %zu)",
                  in.bytes, static_cast<unsigned long long>(count * dim * in_elem),
                  static_cast<unsigned long long>(count), dim, in_elem);
    return Status(Code::kInvalidArgument, Reason::kSizeMismatch, {in.bytes, count, dim, in_elem},
                  buf);
  }
  const bool same = fmt == quant::Format::kFp16 && in.type == RowInput::Type::kF16;
  const size_t rb = row_bytes;
  const size_t in_row = static_cast<size_t>(dim) * in_elem;
  const uint32_t R = rows_per_chunk;
  const uint64_t end = start + count;
  const auto* src = static_cast<const uint8_t*>(in.data);
  std::vector<uint8_t>& scratch = tl_scratch;
  if (!same) {
    const size_t partial = static_cast<size_t>(std::min<uint64_t>(count, 2 * uint64_t{R})) * rb;
    if (scratch.size() < partial) scratch.resize(partial);
  }
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
      pieces->push_back(RowPiece{r, run, c->data, std::move(c)});
    } else if (same) {
      pieces->push_back(RowPiece{r, run, in_p, nullptr});
    } else {
      dst = scratch.data() + sp;
      sp += run * rb;
      pieces->push_back(RowPiece{r, run, dst, nullptr});
    }
    if (dst != nullptr) {
      if (same)
        std::memcpy(dst, in_p, run * rb);
      else
        st = in.type == RowInput::Type::kF32 ? quant::EncodeRows(fmt, in_p, run, dim, dst)
                                             : quant::EncodeRowsF16(fmt, in_p, run, dim, dst);
    }
    r += run;
  }
  if (!st.ok() && pieces->size() > 1) {
    // The row an error names counts from the first row of the store: encode
    // the whole input again for the message (error path only).
    std::vector<uint8_t> whole(count * rb);
    st = in.type == RowInput::Type::kF32
             ? quant::EncodeRows(fmt, in.data, count, dim, whole.data())
             : quant::EncodeRowsF16(fmt, in.data, count, dim, whole.data());
    PION_CHECK(!st.ok());
  }
  return st;
}

uint64_t SideData::ReserveLocked(uint32_t layer, uint64_t end) {
  if (reserved_rows.size() <= layer) reserved_rows.resize(layer + 1, 0);
  const uint64_t old_rows = reserved_rows[layer];
  const uint64_t new_rows = std::max(old_rows, end);
  reserved_rows[layer] = new_rows;
  reserved_total += new_rows - old_rows;
  return next_ticket++;
}

uint64_t SideData::EndTurnLocked() {
  ++applied_ticket;
  if (applied_ticket != next_ticket || reserved_total == total_rows) return 0;
  // Nothing pending on this side and some reservation failed: the rows it
  // reserved are given back.
  const uint64_t over = reserved_total - total_rows;
  reserved_rows.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) reserved_rows[i] = layers[i].rows;
  reserved_total = total_rows;
  return over;
}

void Namespace::ApplyPiecesLocked(SideData& sd, uint32_t layer, std::span<const RowPiece> pieces,
                                  const std::shared_ptr<const void>* backing) {
  for (const RowPiece& p : pieces) {
    if (p.chunk != nullptr)
      InstallChunkLocked(*this, sd, layer, p.start / rows_per_chunk, p.chunk);
    else
      ApplyRowsLocked(*this, sd, layer, p.start, p.count, {p.data, p.count * row_bytes}, backing);
  }
}

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

FetchPlan Namespace::EmptyPlan(uint64_t rows) const {
  FetchPlan plan;
  plan.fmt = fmt;
  plan.dim = dim;
  plan.row_bytes = row_bytes;
  plan.rows = rows;
  return plan;
}

FetchPlan Namespace::PlanRange(Side s, uint32_t layer, uint64_t start, uint64_t end) {
  FetchPlan plan = EmptyPlan(end - start);
  plan.segments = TakeSegmentVector();
  const SideData& sd = side(s);
  base::MutexLock l(&sd.mu);
  PlanLayerRange(*this, sd, layer, start, end, &plan);
  return plan;
}

FetchPlan Namespace::PlanIds(Side s, uint32_t layer, std::span<const uint64_t> ids) {
  FetchPlan plan = EmptyPlan(ids.size());
  plan.segments = TakeSegmentVector();
  const SideData& sd = side(s);
  base::MutexLock l(&sd.mu);
  const Layer* L = layer < sd.layers.size() ? &sd.layers[layer] : nullptr;
  for (uint64_t id : ids) {
    if (L && id < L->rows) ++plan.stored_rows;
    if (id >= kMaxTokens) {
      AppendSegments(nullptr, rows_per_chunk, row_bytes, 0, 1, &plan.segments);
      continue;
    }
    AppendSegments(L, rows_per_chunk, row_bytes, id, id + 1, &plan.segments);
  }
  return plan;
}

Result<std::vector<FetchPlan>> Namespace::PlanLayers(Side s, uint64_t start, uint64_t end,
                                                     uint32_t num_layers) {
  const SideData& sd = side(s);
  std::vector<FetchPlan> plans;
  base::MutexLock l(&sd.mu);
  const uint32_t n =
      num_layers > 0 ? std::min(num_layers, kMaxLayers) : static_cast<uint32_t>(sd.layers.size());
  if (n == 0)
    return Status(Code::kNotFound, Reason::kNothingStored, {}, "session has no stored layers");
  plans.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    PlanLayerRange(*this, sd, i, start, end, &plans.emplace_back(EmptyPlan(end - start)));
  }
  return plans;
}

SessionInfo Namespace::Describe(Side s) const {
  SessionInfo info;
  info.dim = dim;
  info.fmt = fmt;
  const SideData& sd = side(s);
  base::MutexLock l(&sd.mu);
  info.num_layers = static_cast<uint32_t>(sd.layers.size());
  for (const Layer& L : sd.layers) info.layer_tokens.push_back(L.rows);
  info.total_tokens = sd.total_rows;
  info.bytes = sd.total_rows * row_bytes;
  return info;
}

}  // namespace pion::store
