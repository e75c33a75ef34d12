#include "module/ns_value.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/crc32c.h"
#include "persist/records.h"
#include "quant/format.h"

namespace pion::module {

namespace {

using persist::SnapshotNamespace;
using persist::SnapshotSegment;
using redis::api;
using store::Side;

RedisModuleType* g_type = nullptr;

ModuleTotals g_totals;

// A consistent view of the value's namespace (its chunks pinned) and its
// PREFILL_MS. Only the main thread writes the namespace, so nothing changes
// meanwhile.
void Capture(const NsValue& v, SnapshotNamespace* view, uint64_t* prefill_us) {
  store::Namespace& n = *v.ns;
  view->blocks = n.blocks;
  store::CaptureNamespace(n, nullptr, view);
  *prefill_us = n.prefill_us;
}

// One stored run of rows of a layer: [start, start + bytes / row_bytes).
struct Piece {
  uint64_t start;
  const uint8_t* data;
  size_t bytes;
};

// The pieces of `lv` as docs/module_format.md lays them out: every stored
// segment, plus the last row when no stored segment reaches it. `zero_row`
// must hold one row of zeros.
std::vector<Piece> Pieces(const SnapshotNamespace::Layer& lv, size_t row_bytes,
                          const uint8_t* zero_row) {
  std::vector<Piece> out;
  uint64_t pos = 0, end = 0;
  for (const SnapshotSegment& s : lv.segments) {
    if (s.data != nullptr) {
      out.push_back({pos, s.data, s.rows * row_bytes});
      end = pos + s.rows;
    }
    pos += s.rows;
  }
  if (end < lv.rows) out.push_back({lv.rows - 1, zero_row, row_bytes});
  return out;
}

const char* SideWord(int side) { return side == 0 ? "K" : "V"; }

}  // namespace

// --- RDB --------------------------------------------------------------------

void RdbSave(RedisModuleIO* io, void* value) {
  auto* v = static_cast<NsValue*>(value);
  SnapshotNamespace view;
  uint64_t prefill = 0;
  Capture(*v, &view, &prefill);
  const size_t rb = quant::RowBytes(view.fmt, view.kv_dim);
  std::vector<uint8_t> zero_row(rb, 0);
  api.SaveUnsigned(io, view.kv_dim);
  api.SaveUnsigned(io, static_cast<uint64_t>(view.fmt));
  api.SaveUnsigned(io, prefill);
  const bool has_blocks = view.blocks != nullptr;
  api.SaveUnsigned(io, has_blocks ? 1 : 0);
  if (has_blocks) {
    api.SaveUnsigned(io, view.blocks->block_size);
    api.SaveStringBuffer(io, reinterpret_cast<const char*>(view.blocks->hashes.data()),
                         view.blocks->hashes.size() * 8);
  }
  for (int side = 0; side < 2; ++side) {
    api.SaveUnsigned(io, view.layers[side].size());
    for (const SnapshotNamespace::Layer& lv : view.layers[side]) {
      api.SaveUnsigned(io, lv.layer);
      api.SaveUnsigned(io, lv.rows);
      std::vector<Piece> pieces = Pieces(lv, rb, zero_row.data());
      api.SaveUnsigned(io, pieces.size());
      for (const Piece& p : pieces) {
        api.SaveUnsigned(io, p.start);
        api.SaveStringBuffer(io, reinterpret_cast<const char*>(p.data), p.bytes);
      }
    }
  }
}

namespace {
// A buffer from LoadStringBuffer, freed with api.Free.
struct LoadedBuffer {
  char* data = nullptr;
  size_t len = 0;
  ~LoadedBuffer() {
    if (data != nullptr) api.Free(data);
  }
};
}  // namespace

void* RdbLoad(RedisModuleIO* io, int encver) {
  auto fail = [&](const char* why) -> void* {
    api.LogIOError(io, "warning", "pion: refusing a pion-kvns value: %s", why);
    return nullptr;
  };
  if (encver != kEncodingVersion) return fail("unknown encoding version");
  uint64_t dim = api.LoadUnsigned(io);
  uint64_t fmt_v = api.LoadUnsigned(io);
  uint64_t prefill = api.LoadUnsigned(io);
  uint64_t has_blocks = api.LoadUnsigned(io);
  if (fmt_v >= static_cast<uint64_t>(quant::kNumFormats)) return fail("format out of range");
  auto fmt = static_cast<quant::Format>(fmt_v);
  if (dim < 1 || dim > quant::kMaxDim || !quant::DimSupported(fmt, static_cast<uint32_t>(dim)))
    return fail("kv_dim out of range for its format");
  if (has_blocks > 1) return fail("bad block-table flag");
  persist::BlockRecord rec;
  if (has_blocks == 1) {
    uint64_t bs = api.LoadUnsigned(io);
    LoadedBuffer h;
    h.data = api.LoadStringBuffer(io, &h.len);
    if (bs < 1 || bs > store::kMaxBlockSize) return fail("block_size out of range");
    if (h.len % 8 != 0 || h.len / 8 > store::kMaxHashCount) return fail("bad hash list");
    rec.block_size = static_cast<uint32_t>(bs);
    rec.hashes.resize(h.len / 8);
    if (h.len > 0) std::memcpy(rec.hashes.data(), h.data, h.len);
  }
  const uint32_t d = static_cast<uint32_t>(dim);
  store::RegisterArgs ra;
  ra.ns = kInternalNs;
  ra.kv_dim = d;
  ra.fmt = fmt;
  if (has_blocks) ra.blocks = store::BlockTable::Finished(rec);
  ra.has_prefill = prefill > 0;
  ra.prefill_us = prefill;
  std::shared_ptr<store::Namespace> ns;
  if (!store::RegisterUnshared(ra, &ns).ok()) return fail("registration refused");
  store::Namespace& n = *ns;
  const size_t rb = n.row_bytes;
  for (int side = 0; side < 2; ++side) {
    uint64_t layers = api.LoadUnsigned(io);
    if (layers > store::kMaxLayers) return fail("too many layers");
    int64_t last_layer = -1;
    for (uint64_t i = 0; i < layers; ++i) {
      uint64_t layer = api.LoadUnsigned(io);
      uint64_t rows = api.LoadUnsigned(io);
      uint64_t npieces = api.LoadUnsigned(io);
      if (layer >= store::kMaxLayers || static_cast<int64_t>(layer) <= last_layer)
        return fail("layers out of order");
      last_layer = static_cast<int64_t>(layer);
      if (rows < 1 || rows > store::kMaxTokens) return fail("row count out of range");
      if (npieces < 1 || npieces > rows) return fail("piece count out of range");
      for (uint64_t p = 0; p < npieces; ++p) {
        uint64_t start = api.LoadUnsigned(io);
        LoadedBuffer b;
        b.data = api.LoadStringBuffer(io, &b.len);
        if (b.len == 0 || b.len % rb != 0) return fail("piece size is not whole rows");
        uint64_t count = b.len / rb;
        if (start >= rows || count > rows - start) return fail("piece beyond the layer's rows");
        Status st = store::ApplyStoredUnshared(n, static_cast<Side>(side),
                                               static_cast<uint32_t>(layer), start, count,
                                               {reinterpret_cast<const uint8_t*>(b.data), b.len});
        if (!st.ok()) return fail("rows refused");
      }
      store::SessionInfo info = n.Describe(static_cast<Side>(side));
      if (info.layer_tokens.size() <= layer || info.layer_tokens[layer] != rows)
        return fail("pieces do not reach the layer's rows");
    }
  }
  return NewNsValue(std::move(ns));
}

// --- AOF rewrite --------------------------------------------------------------

void AofRewrite(RedisModuleIO* aof, RedisModuleString* key, void* value) {
  auto* v = static_cast<NsValue*>(value);
  SnapshotNamespace view;
  uint64_t prefill = 0;
  Capture(*v, &view, &prefill);
  const std::string fmt(quant::FormatName(view.fmt));
  const long long dim = view.kv_dim;
  const long long ms = static_cast<long long>(prefill / 1000);
  const bool blocks = view.blocks != nullptr;
  const char* cmd = "KV.PREFIX.REGISTER";
  if (blocks) {
    const char* blob = reinterpret_cast<const char*>(view.blocks->hashes.data());
    const size_t len = view.blocks->hashes.size() * 8;
    const long long bs = view.blocks->block_size;
    const long long n = static_cast<long long>(view.blocks->hashes.size());
    if (prefill > 0)
      api.EmitAOF(aof, cmd, "slccllbcl", key, dim, fmt.c_str(), "BLOCKS", bs, n, blob, len,
                  "PREFILL_MS", ms);
    else
      api.EmitAOF(aof, cmd, "slccllb", key, dim, fmt.c_str(), "BLOCKS", bs, n, blob, len);
  } else if (prefill > 0) {
    api.EmitAOF(aof, cmd, "slccl", key, dim, fmt.c_str(), "PREFILL_MS", ms);
  } else {
    api.EmitAOF(aof, cmd, "slc", key, dim, fmt.c_str());
  }
  const size_t rb = quant::RowBytes(view.fmt, view.kv_dim);
  std::vector<uint8_t> zero_row(rb, 0);
  for (int side = 0; side < 2; ++side)
    for (const SnapshotNamespace::Layer& lv : view.layers[side])
      for (const Piece& p : Pieces(lv, rb, zero_row.data()))
        api.EmitAOF(aof, "PION.LOADROWS", "scllb", key, SideWord(side),
                    static_cast<long long>(lv.layer), static_cast<long long>(p.start),
                    reinterpret_cast<const char*>(p.data), p.bytes);
}

// --- memory, digest, copy, free -------------------------------------------------

namespace {
// Bytes allocated for the namespace's rows (chunks) and its block table.
uint64_t AllocatedBytes(const store::Namespace& n) {
  return store::TallyRows(n).chunk_bytes + store::TableBytes(n.blocks);
}
}  // namespace

size_t MemUsage(const void* value) {
  const auto* v = static_cast<const NsValue*>(value);
  return sizeof(NsValue) + sizeof(store::Namespace) + AllocatedBytes(*v->ns);
}

size_t FreeEffort(RedisModuleString*, const void* value) {
  const auto* v = static_cast<const NsValue*>(value);
  // About one allocation per chunk: big namespaces are freed in the background.
  return 1 + AllocatedBytes(*v->ns) / store::kChunkTargetBytes;
}

void Digest(RedisModuleDigest* md, void* value) {
  auto* v = static_cast<NsValue*>(value);
  SnapshotNamespace view;
  uint64_t prefill = 0;
  Capture(*v, &view, &prefill);
  api.DigestAddLongLong(md, view.kv_dim);
  api.DigestAddLongLong(md, static_cast<long long>(view.fmt));
  api.DigestAddLongLong(md, static_cast<long long>(prefill));
  if (view.blocks != nullptr) {
    api.DigestAddLongLong(md, view.blocks->block_size);
    api.DigestAddStringBuffer(md, reinterpret_cast<const char*>(view.blocks->hashes.data()),
                              view.blocks->hashes.size() * 8);
  }
  // Row contents as a CRC32C stream per layer (never-written rows as zeros), so
  // the digest does not depend on how rows happen to be split into chunks.
  const size_t rb = quant::RowBytes(view.fmt, view.kv_dim);
  static const uint8_t kZeros[4096] = {};
  for (int side = 0; side < 2; ++side) {
    for (const SnapshotNamespace::Layer& lv : view.layers[side]) {
      uint32_t crc = 0;
      for (const SnapshotSegment& s : lv.segments) {
        size_t n = s.rows * rb;
        if (s.data != nullptr) {
          crc = crc32c::Extend(crc, s.data, n);
          continue;
        }
        for (size_t off = 0; off < n; off += sizeof(kZeros))
          crc = crc32c::Extend(crc, kZeros, std::min(sizeof(kZeros), n - off));
      }
      api.DigestAddLongLong(md, side);
      api.DigestAddLongLong(md, lv.layer);
      api.DigestAddLongLong(md, static_cast<long long>(lv.rows));
      api.DigestAddLongLong(md, crc);
    }
  }
  api.DigestEndSequence(md);
}

void* Copy(RedisModuleString*, RedisModuleString*, const void* value) {
  const auto* from = static_cast<const NsValue*>(value);
  SnapshotNamespace view;
  uint64_t prefill = 0;
  Capture(*from, &view, &prefill);
  store::RegisterArgs ra;
  ra.ns = kInternalNs;
  ra.kv_dim = view.kv_dim;
  ra.fmt = view.fmt;
  // The block table is the namespace's own finished BlockTable, immutable:
  // shared, not copied.
  ra.blocks = from->ns->blocks;
  ra.has_prefill = prefill > 0;
  ra.prefill_us = prefill;
  std::shared_ptr<store::Namespace> ns;
  if (!store::RegisterUnshared(ra, &ns).ok()) return nullptr;
  const size_t rb = quant::RowBytes(view.fmt, view.kv_dim);
  std::vector<uint8_t> zero_row(rb, 0);
  for (int side = 0; side < 2; ++side)
    for (const SnapshotNamespace::Layer& lv : view.layers[side])
      for (const Piece& p : Pieces(lv, rb, zero_row.data()))
        if (!store::ApplyStoredUnshared(*ns, static_cast<Side>(side), lv.layer, p.start,
                                        p.bytes / rb, {p.data, p.bytes})
                 .ok())
          return nullptr;
  return NewNsValue(std::move(ns));
}

void FreeValue(void* value) { DeleteNsValue(static_cast<NsValue*>(value)); }

ModuleTotals& Totals() { return g_totals; }

NsValue* NewNsValue(std::shared_ptr<store::Namespace> ns) {
  auto* v = new NsValue;
  v->ns = std::move(ns);
  g_totals.namespaces.fetch_add(1, std::memory_order_relaxed);
  Reaccount(v);
  return v;
}

void Reaccount(NsValue* v) {
  const store::Namespace& n = *v->ns;
  const store::RowTally t = store::TallyRows(n);
  // vstore_bytes as a store counts them: rows in stored form and the block table.
  const uint64_t bytes = t.rows * n.row_bytes + store::TableBytes(n.blocks);
  constexpr auto kR = std::memory_order_relaxed;
  // Unsigned wrap-around makes a decrease come out right.
  g_totals.prefix_tokens.fetch_add(t.prefix_tokens - v->acc_prefix_tokens, kR);
  g_totals.total_tokens.fetch_add(t.rows - v->acc_total_tokens, kR);
  g_totals.bytes.fetch_add(bytes - v->acc_bytes, kR);
  v->acc_prefix_tokens = t.prefix_tokens;
  v->acc_total_tokens = t.rows;
  v->acc_bytes = bytes;
}

void DeleteNsValue(NsValue* v) {
  if (v == nullptr) return;
  constexpr auto kR = std::memory_order_relaxed;
  g_totals.prefix_tokens.fetch_sub(v->acc_prefix_tokens, kR);
  g_totals.total_tokens.fetch_sub(v->acc_total_tokens, kR);
  g_totals.bytes.fetch_sub(v->acc_bytes, kR);
  g_totals.namespaces.fetch_sub(1, kR);
  delete v;
}

RedisModuleType* NsType() { return g_type; }

bool CreateNsType(RedisModuleCtx* ctx) {
  redis::TypeMethods tm;
  tm.rdb_load = RdbLoad;
  tm.rdb_save = RdbSave;
  tm.aof_rewrite = AofRewrite;
  tm.mem_usage = MemUsage;
  tm.digest = Digest;
  tm.free = FreeValue;
  tm.free_effort = FreeEffort;
  tm.copy = Copy;
  g_type = api.CreateDataType(ctx, kTypeName, kEncodingVersion, &tm);
  return g_type != nullptr;
}

}  // namespace pion::module
