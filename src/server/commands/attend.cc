// ATTEND.PREFIX.* and KV.PREFIX.WARM (docs/protocol.md "ATTEND.PREFIX"):
// server-side attention over warm slots (src/attend), the warm/cold slot cache
// (attend/slot_cache.h) and its rebuild from the V-store.
//
// Every handler checks its arguments in a fixed order (the one existing clients see), and every
// blob size before anything is allocated or changed. The cold-tier check (-COLDMISS) comes before
// the blob-size checks in QUERY_FUSED, QUERY_SPARSE and QUERY_SPARSE_AUTO(_FUSED) and after them in
// QUERY, as existing clients expect.
//
// Queries hold their own reference to the slot (shared_ptr), so a re-STORE, a
// demotion or a drop while they run frees nothing they read. A query that reads at
// least attend-pool-min-bytes of K/V runs on the compute pool, split over N, and its
// reply is completed from there (ctx.Defer()): the worker keeps serving its other
// clients, and this client's later commands wait, so pipelined replies stay in order.
// A caller that cannot defer (ctx.CanDefer() false) gets the same work done inline.
#include "attend/attend.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/command_env.h"
#include "server/commands/args.h"
#include "store/prefix_ops.h"

namespace pion::server {

namespace {

using attend::AttendRequest;
using attend::Slot;
using attend::SlotState;

using u128 = unsigned __int128;

constexpr uint32_t kMaxSuffix = 1u << 20;
constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();

bool Int(CommandContext& ctx, std::string_view a, int64_t* out) {
  auto v = ParseInt64Strict(a);
  if (!v) {
    ctx.reply->Error(kErrNotInteger);
    return false;
  }
  *out = *v;
  return true;
}

bool Layer(CommandContext& ctx, std::string_view a, uint32_t* out) {
  int64_t v;
  if (!Int(ctx, a, &v)) return false;
  if (v < 0 || v > kMaxI32) {
    ctx.reply->Error(kErrAttendLayer);
    return false;
  }
  *out = static_cast<uint32_t>(v);
  return true;
}

// fa_window: -1 = no window (the placeholder before a selector id), 0 = full, W > 0.
bool Window(CommandContext& ctx, std::string_view a, int32_t* out) {
  int64_t v;
  if (!Int(ctx, a, &v)) return false;
  if (v < -1 || v > kMaxI32) {
    ctx.reply->Error(kErrAttendWindow);
    return false;
  }
  *out = v < 0 ? 0 : static_cast<int32_t>(v);
  return true;
}

std::vector<float> Floats(std::string_view b) {
  std::vector<float> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

std::vector<int32_t> Ints(std::string_view b) {
  std::vector<int32_t> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

std::vector<int32_t> HeadMap(std::string_view b) {
  std::vector<int32_t> v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = static_cast<uint8_t>(b[i]);
  return v;
}

void WriteFloats(ReplyBuilder& r, const std::vector<float>& v) {
  uint8_t* p = r.BulkReserve(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(p, v.data(), v.size() * sizeof(float));
}

// One query, with everything it reads owned (the command's arguments die with the
// call) and its slot pinned.
struct QueryJob {
  std::string sid;
  uint32_t layer = 0;
  std::shared_ptr<const Slot> slot;
  AttendRequest req;
  std::vector<float> q, k_suf, v_suf;
  std::vector<int32_t> head_map, indices, counts;
  bool lse = false;
  bool recount = false;  // sparse auto: block statistics may have been built
  std::string_view failed;

  void Bind() {
    req.q = q.data();
    req.k_suf = k_suf.empty() ? nullptr : k_suf.data();
    req.v_suf = v_suf.empty() ? nullptr : v_suf.data();
    req.head_map = head_map.empty() ? nullptr : head_map.data();
    req.indices = indices.empty() && req.k_sparse_max == 0 ? nullptr : indices.data();
    req.counts = counts.empty() && req.k_sparse_max == 0 ? nullptr : counts.data();
  }
  uint64_t work_bytes() const {
    return slot->kv_bytes() + (k_suf.size() + v_suf.size()) * sizeof(float);
  }
  Status Run(attend::Executor* ex, std::vector<float>* out) const {
    const size_t on = static_cast<size_t>(req.h_q) * req.m * req.d;
    const size_t ln = lse ? static_cast<size_t>(req.h_q) * req.m : 0;
    out->resize(on + ln);
    attend::AttendOptions o;
    o.executor = ex;
    return attend::Attend(*slot, req, out->data(), lse ? out->data() + on : nullptr, o);
  }
};

void AfterQuery(CommandEnv* env, const QueryJob& j) {
  env->attention().CountQuery();
  if (j.recount) env->attention().cache().Recount(j.sid, j.layer, j.slot.get());
}

void RunQuery(CommandContext& ctx, std::unique_ptr<QueryJob> job) {
  job->Bind();
  CommandEnv* env = ctx.env;
  const bool big = job->work_bytes() >= env->attention().pool_min_bytes();
  if (big && ctx.CanDefer()) {
    std::shared_ptr<QueryJob> j(std::move(job));
    std::shared_ptr<DeferredReply> done = ctx.Defer();
    bool queued = env->attention().pool().Post([env, j, done] {
      auto out = std::make_shared<std::vector<float>>();
      Status st = j->Run(&env->attention().pool(), out.get());
      if (!st.ok()) {
        std::string_view text = j->failed;
        done->Complete([text](ReplyBuilder& r) { r.Error(text); });
        return;
      }
      AfterQuery(env, *j);
      done->Complete([out](ReplyBuilder& r) { WriteFloats(r, *out); });
    });
    if (!queued) done->Complete([](ReplyBuilder& r) { r.Error(kErrShuttingDown); });
    return;
  }
  std::vector<float> out;
  Status st = job->Run(big ? &env->attention().pool() : nullptr, &out);
  if (!st.ok()) return ctx.reply->Error(job->failed);
  AfterQuery(env, *job);
  WriteFloats(*ctx.reply, out);
}

// The slot of (sid, layer) for a query, stamped most recent: null after replying
// COLDMISS (cold) or `failed` (missing).
std::shared_ptr<const Slot> Resolve(CommandContext& ctx, std::string_view sid, uint32_t layer,
                                    std::string_view failed) {
  SlotState st;
  auto slot = ctx.env->attention().cache().Acquire(sid, layer, &st);
  if (slot) return slot;
  ctx.reply->Error(st == SlotState::kCold ? kErrColdMiss : failed);
  return nullptr;
}

// --------------------------------------------------------------------- STORE

uint64_t EstimateSlotBytes(attend::Precision p, uint64_t h, uint64_t n, uint64_t d) {
  uint64_t region = h * n * d * attend::ElementBytes(p) + 64;
  uint64_t b = 2 * region;
  if (p == attend::Precision::kInt8) b += 2 * (h * n * 4 + 64);
  return b;
}

// A pointer to the blob as T, copied into `tmp` when it is not aligned for T.
template <typename T>
const T* Aligned(std::string_view b, std::vector<T>* tmp) {
  if (reinterpret_cast<uintptr_t>(b.data()) % alignof(T) == 0)
    return reinterpret_cast<const T*>(b.data());
  tmp->resize(b.size() / sizeof(T));
  std::memcpy(tmp->data(), b.data(), tmp->size() * sizeof(T));
  return tmp->data();
}

void AttendStore(CommandContext& ctx) {
  auto a = ctx.args;
  if (a.size() < 8) return ctx.reply->Error(kErrAttendStoreArgs);
  bool f16 = false;
  if (a.size() != 8) {
    if (a.size() != 10 || !IsKeyword(a[8], "FMT")) return ctx.reply->Error(kErrAttendStoreOption);
    if (IsKeyword(a[9], "F16"))
      f16 = true;
    else if (!IsKeyword(a[9], "F32"))
      return ctx.reply->Error(kErrAttendStoreOption);
  }
  uint32_t layer;
  if (!Layer(ctx, a[2], &layer)) return;
  int64_t h, n, d;
  if (!Int(ctx, a[3], &h) || !Int(ctx, a[4], &n) || !Int(ctx, a[5], &d)) return;
  if (h <= 0 || n <= 0 || d <= 0) return ctx.reply->Error(kErrAttendStoreShape);
  const u128 want =
      static_cast<u128>(h) * static_cast<u128>(n) * static_cast<u128>(d) * (f16 ? 2u : 4u);
  if (a[6].size() != want || a[7].size() != want)
    return ctx.reply->Error(f16 ? kErrAttendStoreBlobsF16 : kErrAttendStoreBlobs);
  if (h > attend::kMaxHeads || d > attend::kMaxHeadDim || n > std::numeric_limits<uint32_t>::max())
    return ctx.reply->Error(AttendStoreError("unsupported D? supported: D 1..1024, H 1..1024"));
  CommandEnv* env = ctx.env;
  const attend::Precision p = env->attention().precision();
  Status adm = env->attention().cache().Admit(EstimateSlotBytes(p, h, n, d));
  if (!adm.ok()) return ctx.reply->Error(AttendStoreError(adm));
  // A new slot object: queries on the old one keep reading it; on failure the old
  // one stays installed.
  auto slot = std::make_shared<Slot>(env->attention().cache().arena());
  const auto uh = static_cast<uint32_t>(h), un = static_cast<uint32_t>(n),
             ud = static_cast<uint32_t>(d);
  Status st;
  if (f16) {
    std::vector<uint16_t> tk, tv;
    st = slot->StoreF16(p, uh, un, ud, Aligned(a[6], &tk), Aligned(a[7], &tv));
  } else {
    std::vector<float> tk, tv;
    st = slot->StoreF32(p, uh, un, ud, Aligned(a[6], &tk), Aligned(a[7], &tv));
  }
  if (!st.ok()) return ctx.reply->Error(AttendStoreError(st));
  env->attention().cache().Put(a[1], layer, std::move(slot));
  ctx.reply->SimpleString("OK");
}

// -------------------------------------------------------------- LOOKUP, DROP

void AttendLookup(CommandContext& ctx) {
  auto a = ctx.args;
  if (a.size() != 3) return ctx.reply->Error(kErrAttendLookupArgs);
  uint32_t layer;
  if (!Layer(ctx, a[2], &layer)) return;
  switch (ctx.env->attention().cache().State(a[1], layer)) {
    case SlotState::kWarm:
      return ctx.reply->SimpleString("HIT");
    case SlotState::kCold:
      return ctx.reply->SimpleString("COLD");
    case SlotState::kMissing:
      return ctx.reply->SimpleString("MISS");
  }
}

void AttendDrop(CommandContext& ctx) {
  auto a = ctx.args;
  if (a.size() < 2 || a.size() > 3) return ctx.reply->Error(kErrAttendDropArgs);
  std::optional<uint32_t> layer;
  if (a.size() == 3) {
    uint32_t l;
    if (!Layer(ctx, a[2], &l)) return;
    layer = l;
  }
  ctx.reply->Integer(static_cast<int64_t>(ctx.env->attention().cache().Drop(a[1], layer)));
}

// ------------------------------------------------------------------- QUERY

void AttendQuery(CommandContext& ctx) {
  auto a = ctx.args;
  if (a.size() < 7 || a.size() > 8) return ctx.reply->Error(kErrAttendQueryArgs);
  uint32_t layer;
  if (!Layer(ctx, a[2], &layer)) return;
  int64_t h, d, top_k;
  if (!Int(ctx, a[3], &h) || !Int(ctx, a[4], &d) || !Int(ctx, a[5], &top_k)) return;
  if (h <= 0 || d <= 0 || top_k <= 0) return ctx.reply->Error(kErrAttendQueryShape);
  const u128 row = static_cast<u128>(h) * static_cast<u128>(d) * 4;
  if (a[6].empty() || a[6].size() % row != 0) return ctx.reply->Error(kErrAttendQueryQ);
  int32_t window = 0;
  if (a.size() == 8 && !Window(ctx, a[7], &window)) return;
  auto slot = Resolve(ctx, a[1], layer, kErrAttendQueryFailed);
  if (!slot) return;
  const uint64_t m = a[6].size() / static_cast<uint64_t>(row);
  if (slot->heads() != h || slot->dim() != d || m > attend::kMaxQueryRows)
    return ctx.reply->Error(kErrAttendQueryFailed);
  auto j = std::make_unique<QueryJob>();
  j->sid = std::string(a[1]);
  j->layer = layer;
  j->slot = std::move(slot);
  j->q = Floats(a[6]);
  j->req.h_q = static_cast<uint32_t>(h);
  j->req.m = static_cast<uint32_t>(m);
  j->req.d = static_cast<uint32_t>(d);
  j->req.window = window;
  j->lse = m > 1;
  j->failed = kErrAttendQueryFailed;
  RunQuery(ctx, std::move(j));
}

// QUERY_FUSED <sid> <layer> <H_q> <D> <S_suf> <H_kv> <Q> <K_suf> <V_suf> <head_map>
//             [<fa_window>] [LSE]
void AttendQueryFused(CommandContext& ctx) {
  auto a = ctx.args;
  size_t end = a.size();
  bool lse = false;
  if (end > 11 && IsKeyword(a[end - 1], "LSE")) {
    lse = true;
    --end;
  }
  if (end < 11 || end > 12) return ctx.reply->Error(kErrAttendFusedArgs);
  uint32_t layer;
  if (!Layer(ctx, a[2], &layer)) return;
  int64_t hq, d, s, hkv;
  if (!Int(ctx, a[3], &hq) || !Int(ctx, a[4], &d) || !Int(ctx, a[5], &s) || !Int(ctx, a[6], &hkv))
    return;
  if (hq <= 0 || d <= 0 || hkv <= 0 || s < 0) return ctx.reply->Error(kErrAttendFusedShape);
  if (hq % hkv != 0) return ctx.reply->Error(kErrAttendGqa);
  int32_t window = 0;
  if (end == 12 && !Window(ctx, a[11], &window)) return;
  auto slot = Resolve(ctx, a[1], layer, kErrAttendFusedFailed);
  if (!slot) return;
  const u128 row = static_cast<u128>(hq) * static_cast<u128>(d) * 4;
  if (a[7].empty() || a[7].size() % row != 0) return ctx.reply->Error(kErrAttendFusedQ);
  const u128 suf = static_cast<u128>(hkv) * static_cast<u128>(s) * static_cast<u128>(d) * 4;
  if (a[8].size() != suf || a[9].size() != suf) return ctx.reply->Error(kErrAttendSuffix);
  if (!a[10].empty() && a[10].size() != static_cast<uint64_t>(hq))
    return ctx.reply->Error(kErrAttendHeadMap);
  const uint64_t m = a[7].size() / static_cast<uint64_t>(row);
  if (s > 0 && m > static_cast<uint64_t>(s)) return ctx.reply->Error(kErrAttendRowsBeyondSuffix);
  if (slot->heads() != hkv || slot->dim() != d || hq > attend::kMaxHeads ||
      m > attend::kMaxQueryRows || s > kMaxSuffix)
    return ctx.reply->Error(kErrAttendFusedFailed);
  auto j = std::make_unique<QueryJob>();
  j->sid = std::string(a[1]);
  j->layer = layer;
  j->slot = std::move(slot);
  j->q = Floats(a[7]);
  j->k_suf = Floats(a[8]);
  j->v_suf = Floats(a[9]);
  j->head_map = HeadMap(a[10]);
  j->req.h_q = static_cast<uint32_t>(hq);
  j->req.h_kv = static_cast<uint32_t>(hkv);
  j->req.m = static_cast<uint32_t>(m);
  j->req.d = static_cast<uint32_t>(d);
  j->req.s = static_cast<uint32_t>(s);
  j->req.window = window;
  j->lse = lse;
  j->failed = kErrAttendFusedFailed;
  RunQuery(ctx, std::move(j));
}

// QUERY_SPARSE <sid> <layer> <H> <D> <K_sparse_max> <Q> <indices> <counts> [<fa_window>]
void AttendQuerySparse(CommandContext& ctx) {
  auto a = ctx.args;
  if (a.size() < 9 || a.size() > 10) return ctx.reply->Error(kErrAttendSparseArgs);
  uint32_t layer;
  if (!Layer(ctx, a[2], &layer)) return;
  int64_t h, d, ksm;
  if (!Int(ctx, a[3], &h) || !Int(ctx, a[4], &d) || !Int(ctx, a[5], &ksm)) return;
  if (h <= 0 || d <= 0 || ksm <= 0) return ctx.reply->Error(kErrAttendSparseShape);
  int32_t window = 0;
  if (a.size() == 10 && !Window(ctx, a[9], &window)) return;
  auto slot = Resolve(ctx, a[1], layer, kErrAttendSparseFailed);
  if (!slot) return;
  if (a[6].size() != static_cast<u128>(h) * static_cast<u128>(d) * 4)
    return ctx.reply->Error(kErrAttendSparseQ);
  if (a[7].size() != static_cast<u128>(h) * static_cast<u128>(ksm) * 4)
    return ctx.reply->Error(kErrAttendSparseIndices);
  if (a[8].size() != static_cast<u128>(h) * 4) return ctx.reply->Error(kErrAttendSparseCounts);
  if (slot->heads() != h || slot->dim() != d) return ctx.reply->Error(kErrAttendSparseFailed);
  auto j = std::make_unique<QueryJob>();
  j->sid = std::string(a[1]);
  j->layer = layer;
  j->slot = std::move(slot);
  j->q = Floats(a[6]);
  j->indices = Ints(a[7]);
  j->counts = Ints(a[8]);
  j->req.h_q = static_cast<uint32_t>(h);
  j->req.d = static_cast<uint32_t>(d);
  j->req.k_sparse_max = static_cast<uint32_t>(ksm);
  j->req.window = window;
  j->failed = kErrAttendSparseFailed;
  RunQuery(ctx, std::move(j));
}

// QUERY_SPARSE_AUTO <sid> <layer> <H_q> <D> <B> <K_top> <H_kv> <Q> <head_map>
//                   [<fa_window>] [<selector_id>]
// QUERY_SPARSE_AUTO_FUSED <sid> <layer> <H_q> <D> <B> <K_top> <H_kv> <S_suf> <Q> <K_suf>
//                   <V_suf> <head_map> [<fa_window>] [<selector_id>]
void SparseAuto(CommandContext& ctx, bool fused) {
  auto a = ctx.args;
  const size_t base = fused ? 13 : 10;  // arguments up to head_map, name included
  const std::string_view failed = fused ? kErrAttendAutoFusedFailed : kErrAttendAutoFailed;
  if (a.size() < base || a.size() > base + 2)
    return ctx.reply->Error(fused ? kErrAttendAutoFusedArgs : kErrAttendAutoArgs);
  uint32_t layer;
  if (!Layer(ctx, a[2], &layer)) return;
  int64_t hq, d, b, k_top, hkv, s = 0;
  if (!Int(ctx, a[3], &hq) || !Int(ctx, a[4], &d) || !Int(ctx, a[5], &b) ||
      !Int(ctx, a[6], &k_top) || !Int(ctx, a[7], &hkv))
    return;
  if (fused && !Int(ctx, a[8], &s)) return;
  if (hq <= 0 || d <= 0 || b <= 0 || k_top <= 0 || hkv <= 0)
    return ctx.reply->Error(kErrAttendAutoShape);
  if (s < 0) return ctx.reply->Error(kErrAttendSuffixNegative);
  if (hq % hkv != 0) return ctx.reply->Error(kErrAttendGqa);
  int32_t window = 0;
  if (a.size() > base && !Window(ctx, a[base], &window)) return;
  int64_t selector = 0;
  if (a.size() > base + 1 && !Int(ctx, a[base + 1], &selector)) return;
  auto slot = Resolve(ctx, a[1], layer, failed);
  if (!slot) return;
  const size_t qi = fused ? 9 : 8;
  const size_t hmi = fused ? 12 : 9;
  if (a[qi].size() != static_cast<u128>(hq) * static_cast<u128>(d) * 4)
    return ctx.reply->Error(kErrAttendAutoQ);
  if (fused) {
    const u128 suf = static_cast<u128>(hkv) * static_cast<u128>(s) * static_cast<u128>(d) * 4;
    if (a[10].size() != suf || a[11].size() != suf) return ctx.reply->Error(kErrAttendSuffix);
  }
  if (!a[hmi].empty() && a[hmi].size() != static_cast<uint64_t>(hq))
    return ctx.reply->Error(kErrAttendAutoHeadMap);
  if (slot->heads() != hkv || slot->dim() != d || hq > attend::kMaxHeads || b > kMaxI32 ||
      k_top > kMaxI32 || s > kMaxSuffix)
    return ctx.reply->Error(failed);
  auto j = std::make_unique<QueryJob>();
  j->sid = std::string(a[1]);
  j->layer = layer;
  j->slot = std::move(slot);
  j->q = Floats(a[qi]);
  if (fused) {
    j->k_suf = Floats(a[10]);
    j->v_suf = Floats(a[11]);
  }
  j->head_map = HeadMap(a[hmi]);
  j->req.h_q = static_cast<uint32_t>(hq);
  j->req.h_kv = static_cast<uint32_t>(hkv);
  j->req.d = static_cast<uint32_t>(d);
  j->req.s = static_cast<uint32_t>(s);
  j->req.window = window;
  j->req.sparse_auto = true;
  j->req.block = static_cast<uint32_t>(b);
  j->req.k_top = static_cast<uint32_t>(k_top);
  // 1 = Quest; any other id is block-mean (existing clients rely on it).
  j->req.selector = selector == 1 ? attend::Selector::kQuest : attend::Selector::kBlockMean;
  j->recount = true;
  j->failed = failed;
  RunQuery(ctx, std::move(j));
}

void AttendQuerySparseAuto(CommandContext& ctx) { SparseAuto(ctx, false); }
void AttendQuerySparseAutoFused(CommandContext& ctx) { SparseAuto(ctx, true); }

// --------------------------------------------------------------------- WARM

constexpr size_t kZeroBytes = 1u << 20;
const uint8_t* ZeroBlock() {
  static const std::vector<uint8_t>* z = new std::vector<uint8_t>(kZeroBytes, 0);
  return z->data();
}

// The rows of a fetch plan as slot input; rows never written read as zeros.
void Spans(const store::FetchPlan& p, std::vector<attend::RowSpan>* out) {
  const size_t zero_rows = std::max<size_t>(1, kZeroBytes / std::max<size_t>(1, p.row_bytes));
  for (const store::FetchSegment& s : p.segments) {
    if (s.data != nullptr) {
      out->push_back({s.data, s.rows});
      continue;
    }
    for (uint64_t r = 0; r < s.rows; r += zero_rows)
      out->push_back({ZeroBlock(), std::min<uint64_t>(zero_rows, s.rows - r)});
  }
}

struct WarmResult {
  uint64_t stored = 0;
  uint64_t skipped_dim = 0;
};

// Rebuilds the slots (attend_sid, layer) of every layer held in both <ns>_pk and
// <ns>_pv, in parallel over the layers on the compute pool.
//
// Order: the layers are installed (Put, which stamps them most recent and may demote)
// in the order of their last access, least recent first (missing layers first, by
// layer index), so the rebuild keeps the session's own LRU order. When the cache holds
// fewer slots than the namespace has layers, the layer a query just met COLDMISS on
// (SlotCache::Acquire stamps the cold entry) goes in last and stays warm for the
// client's retry. Slots are built in parallel but installed strictly in that order: a
// slot finished ahead of its turn waits (a few slots at most: the pool claims layers in
// order) and the thread that installs the one before it installs it too.
WarmResult Warm(CommandEnv* env, const std::string& ns, uint32_t h, uint32_t d,
                const std::string& attend_sid) {
  WarmResult res;
  store::Store* st = env->store();
  auto ik = store::OpSessionInfo({*st}, ns + "_pk");
  auto iv = store::OpSessionInfo({*st}, ns + "_pv");
  if (!ik.ok() || !iv.ok()) return res;
  struct Layer {
    uint32_t layer;
    uint64_t n;
    uint64_t last;
  };
  std::vector<Layer> layers;
  attend::SlotCache& cache = env->attention().cache();
  const uint32_t nl = std::min(ik->num_layers, iv->num_layers);
  for (uint32_t l = 0; l < nl; ++l) {
    uint64_t n = std::min(ik->layer_tokens[l], iv->layer_tokens[l]);
    if (n == 0) continue;
    if (ik->dim != static_cast<uint64_t>(h) * d || iv->dim != ik->dim) {
      ++res.skipped_dim;
      continue;
    }
    layers.push_back({l, n, cache.LastAccess(attend_sid, l)});
  }
  std::stable_sort(layers.begin(), layers.end(),
                   [](const Layer& x, const Layer& y) { return x.last < y.last; });
  const attend::Precision p = env->attention().precision();
  const std::string ks = ns + "_pk", vs = ns + "_pv";
  std::mutex mu;  // guards built, ready, next
  std::vector<std::shared_ptr<Slot>> built(layers.size());
  std::vector<char> ready(layers.size(), 0);
  size_t next = 0;
  uint64_t stored = 0;
  auto build = [&](uint32_t i) -> std::shared_ptr<Slot> {
    const uint32_t layer = layers[i].layer;
    const uint64_t n = layers[i].n;
    if (!cache.Admit(EstimateSlotBytes(p, h, n, d)).ok()) return nullptr;
    auto kp = store::OpFetchRange({*st}, ks, layer, 0, n);
    auto vp = store::OpFetchRange({*st}, vs, layer, 0, n);
    if (!kp.ok() || !vp.ok() || kp->rows != n || vp->rows != n || kp->fmt != vp->fmt)
      return nullptr;
    std::vector<attend::RowSpan> kr, vr;
    Spans(*kp, &kr);
    Spans(*vp, &vr);
    auto slot = std::make_shared<Slot>(cache.arena());
    if (!slot->StoreRows(p, h, d, kp->fmt, kr, vr).ok()) return nullptr;
    return slot;
  };
  env->attention().pool().ParallelFor(static_cast<uint32_t>(layers.size()), [&](uint32_t i) {
    std::shared_ptr<Slot> slot = build(i);
    std::lock_guard<std::mutex> l(mu);
    built[i] = std::move(slot);
    ready[i] = 1;
    for (; next < layers.size() && ready[next]; ++next) {
      if (!built[next]) continue;
      cache.Put(attend_sid, layers[next].layer, std::move(built[next]));
      ++stored;
    }
  });
  res.stored = stored;
  return res;
}

std::string WarmReply(const WarmResult& r) {
  std::string s = std::to_string(r.stored);
  if (r.skipped_dim > 0) s += " skipped_dim=" + std::to_string(r.skipped_dim);
  return s;
}

void KvWarm(CommandContext& ctx) {
  auto a = ctx.args;
  if (a.size() < 4 || a.size() > 5) return ctx.reply->Error(kErrWarmArgs);
  if (a[1].empty() || a[1].size() > store::kMaxNamespaceBytes)
    return ctx.reply->Error(kErrNsKeyLength);
  int64_t h, d;
  if (!Int(ctx, a[2], &h) || !Int(ctx, a[3], &d)) return;
  if (h < 1 || h > 256 || d < 1 || d > 512) return ctx.reply->Error(kErrWarmShape);
  std::string ns(a[1]);
  std::string sid = a.size() == 5 && !a[4].empty() ? std::string(a[4]) : ns;
  CommandEnv* env = ctx.env;
  const auto uh = static_cast<uint32_t>(h), ud = static_cast<uint32_t>(d);
  if (!ctx.CanDefer()) return ctx.reply->SimpleString(WarmReply(Warm(env, ns, uh, ud, sid)));
  std::shared_ptr<DeferredReply> done = ctx.Defer();
  bool queued =
      env->attention().pool().Post([env, ns = std::move(ns), sid = std::move(sid), uh, ud, done] {
        done->SimpleString(WarmReply(Warm(env, ns, uh, ud, sid)));
      });
  if (!queued) done->Complete([](ReplyBuilder& r) { r.Error(kErrShuttingDown); });
}

}  // namespace

void AppendAttendInfo(CommandEnv& s, std::string* out) {
  attend::SlotCacheStats st = s.attention().cache().Stats();
  InfoField(out, "sdpa_warm", st.warm);
  InfoField(out, "sdpa_cold", st.cold);
  InfoField(out, "sdpa_demotions", st.demotions);
  InfoField(out, "sdpa_rehydrates", st.rehydrates);
  InfoField(out, "sdpa_bytes", st.bytes);
  InfoField(out, "sdpa_arena_bytes", st.arena.kept_bytes);
  InfoField(out, "sdpa_arena_reused", st.arena.reused);
  InfoField(out, "sdpa_queries", s.attention().queries());
  InfoField(out, "attend_precision", std::string(attend::PrecisionName(s.attention().precision())));
  InfoField(out, "attend_threads", static_cast<uint64_t>(s.attention().threads()));
}

void AddAttendCommands(std::vector<CommandSpec>* out) {
  const PionHandler handlers[] = {
      {"ATTEND.PREFIX.STORE", AttendStore},
      {"ATTEND.PREFIX.LOOKUP", AttendLookup},
      {"ATTEND.PREFIX.QUERY", AttendQuery},
      {"ATTEND.PREFIX.QUERY_FUSED", AttendQueryFused},
      {"ATTEND.PREFIX.QUERY_SPARSE", AttendQuerySparse},
      {"ATTEND.PREFIX.QUERY_SPARSE_AUTO", AttendQuerySparseAuto},
      {"ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED", AttendQuerySparseAutoFused},
      {"ATTEND.PREFIX.DROP", AttendDrop},
      {"KV.PREFIX.WARM", KvWarm},
  };
  AddPionCommands(handlers, out);
}

}  // namespace pion::server
