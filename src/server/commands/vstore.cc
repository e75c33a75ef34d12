// V.* (product.md §6): rows in and out of the V-store. A fetch pins the chunks
// it needs (Store::Fetch*), then, with no lock held, either decodes them into an
// exactly-sized reply buffer (F32/F16) or, for rows stored as fp16, sends the
// stored bytes themselves with writev (NATIVE/F16): no copy at all.
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "net/buffer.h"
#include "net/connection.h"
#include "server/commands/args.h"
#include "server/server.h"

namespace pion::server {

namespace {

using store::Chunk;
using store::FetchPlan;
using store::FetchSegment;

constexpr int64_t kMaxLayer = store::kMaxLayers - 1;
constexpr int64_t kMaxTokens = static_cast<int64_t>(store::kMaxTokens);
constexpr size_t kMaxIds = 4096;
constexpr uint64_t kMaxReplyBytes = 1ull << 30;

enum class OutFmt { kF32, kF16, kNative };

// Zeros sent by reference for rows never written: a reply over rows nobody
// stored costs no memory however long it is (untouched pages of this block all
// map the kernel's zero page).
alignas(4096) const uint8_t kZeros[1u << 20] = {};

// Appends iovecs covering `n` zero bytes.
void ZeroParts(size_t n, std::vector<iovec>* iov) {
  while (n > 0) {
    size_t k = std::min(n, sizeof(kZeros));
    iov->push_back({const_cast<uint8_t*>(kZeros), k});
    n -= k;
  }
}

// Decoded rows of a reply that also sends zeros by reference: a private
// buffer, counted as client memory until the reply has been written.
struct DecodedRows {
  IoBuf buf;
  Server* server = nullptr;
  ~DecodedRows() {
    if (server != nullptr) server->clients().AdjustMemory(-static_cast<int64_t>(buf.capacity()));
  }
};

bool ParseOutFmt(CommandContext& ctx, std::string_view v, OutFmt* out) {
  if (IsKeyword(v, "F32")) {
    *out = OutFmt::kF32;
  } else if (IsKeyword(v, "F16")) {
    *out = OutFmt::kF16;
  } else if (IsKeyword(v, "NATIVE")) {
    *out = OutFmt::kNative;
  } else {
    ctx.reply->Error(FetchFormatError(v));
    return false;
  }
  return true;
}

bool ParseLayer(CommandContext& ctx, std::string_view arg, uint32_t* layer) {
  int64_t v;
  if (!ArgInRange(ctx, arg, 0, kMaxLayer, kErrLayerRange, &v)) return false;
  *layer = static_cast<uint32_t>(v);
  return true;
}

// Bytes of one output element of `plan` in `fmt`.
uint64_t ElemBytes(const FetchPlan& p, OutFmt fmt) {
  bool raw = p.fmt == quant::Format::kFp16 && fmt != OutFmt::kF32;
  return raw || fmt == OutFmt::kF16 ? 2 : 4;
}

// Bytes of the reply body for `plan` in `fmt`.
uint64_t BodyBytes(const FetchPlan& p, OutFmt fmt) { return p.rows * p.dim * ElemBytes(p, fmt); }

// Bytes the reply must allocate: decoded stored rows (fp16 sent as stored and
// zeros go by reference).
uint64_t DecodedBytes(const FetchPlan& p, OutFmt fmt) {
  if (p.fmt == quant::Format::kFp16 && fmt != OutFmt::kF32) return 0;
  uint64_t rows = 0;
  for (const FetchSegment& s : p.segments)
    if (s.data) rows += s.rows;
  return rows * p.dim * ElemBytes(p, fmt);
}

void DecodeSegment(const FetchPlan& plan, const FetchSegment& s, size_t elem, uint8_t* out) {
  if (elem == 4)
    quant::DecodeRows(plan.fmt, s.data, s.rows, plan.dim, out);  // any alignment
  else
    quant::DecodeRowsF16(plan.fmt, s.data, s.rows, plan.dim, out);
}

// Writes one layer's rows as a bulk string, or a null if no requested row is
// stored. Returns the payload bytes sent (for the receipt).
uint64_t ReplyPlan(CommandContext& ctx, FetchPlan&& plan, OutFmt fmt) {
  if (plan.stored_rows == 0) {
    ctx.reply->Null();
    return 0;
  }
  const uint64_t len = BodyBytes(plan, fmt);
  const bool fp16 = plan.fmt == quant::Format::kFp16;
  if (fp16 && fmt != OutFmt::kF32) {
    // Stored bytes are the reply: send them by reference, pinned.
    auto pin = std::make_shared<std::vector<FetchSegment>>(std::move(plan.segments));
    std::vector<iovec> iov;
    iov.reserve(pin->size());
    // Whole chunks: a pin keeps dropped or evicted rows alive.
    std::vector<PinnedBlock> blocks;
    for (const FetchSegment& s : *pin) {
      size_t n = s.rows * plan.row_bytes;
      if (!s.data) {
        ZeroParts(n, &iov);
        continue;
      }
      iov.push_back({const_cast<uint8_t*>(s.data), n});
      const void* id = s.chunk != nullptr ? static_cast<const void*>(s.chunk.get()) : s.data;
      if (blocks.empty() || blocks.back().id != id)
        blocks.push_back({id, s.chunk != nullptr ? s.chunk->bytes() : n});
    }
    if (blocks.empty())
      ctx.reply->BulkExternal(len, iov, std::move(pin));
    else
      ctx.reply->BulkPinned(len, iov, std::move(pin), blocks);
    return len;
  }
  const size_t elem = fmt == OutFmt::kF32 || fmt == OutFmt::kNative ? 4 : 2;
  const uint64_t decoded = DecodedBytes(plan, fmt);
  if (decoded < len) {
    // Some rows were never written: decode the stored ones into a private
    // buffer and send the gaps as zeros by reference.
    auto rows = std::make_shared<DecodedRows>();
    rows->buf = IoBuf::TryAllocate(decoded);
    if (rows->buf.empty()) {
      ctx.reply->Error(kErrNoMemory);
      return 0;
    }
    rows->server = ctx.server;
    ctx.server->clients().AdjustMemory(static_cast<int64_t>(rows->buf.capacity()));
    uint8_t* out = reinterpret_cast<uint8_t*>(rows->buf.data());
    std::vector<iovec> iov;
    for (const FetchSegment& s : plan.segments) {
      size_t n = s.rows * plan.dim * elem;
      if (!s.data) {
        ZeroParts(n, &iov);
        continue;
      }
      DecodeSegment(plan, s, elem, out);
      iov.push_back({out, n});
      out += n;
    }
    const PinnedBlock block{rows.get(), rows->buf.capacity()};
    ctx.reply->BulkPinned(len, iov, std::move(rows), {&block, 1});
    return len;
  }
  uint8_t* out = ctx.reply->TryBulkReserve(len);
  if (out == nullptr) {
    ctx.reply->Error(kErrNoMemory);
    return 0;
  }
  for (const FetchSegment& s : plan.segments) {
    DecodeSegment(plan, s, elem, out);
    out += s.rows * plan.dim * elem;
  }
  store::RecycleSegmentVector(std::move(plan.segments));  // decoded: the pins can go
  return len;
}

// The reply's size limit, and the client memory its decoded rows need
// (maxmemory-clients); false (and replied) when either refuses it.
bool CheckReply(CommandContext& ctx, std::span<const FetchPlan> plans, OutFmt fmt) {
  uint64_t body = 0, decoded = 0;
  for (const FetchPlan& p : plans) {
    body += BodyBytes(p, fmt);
    decoded += DecodedBytes(p, fmt);
  }
  if (body > kMaxReplyBytes) {
    ctx.reply->Error(kErrFetchReplyTooBig);
    return false;
  }
  constexpr uint64_t kGated = 1u << 20;
  if (decoded >= kGated) {
    ClientControl* c = ctx.client != nullptr ? ctx.client->control : nullptr;
    bool ok = c != nullptr ? c->ReserveMemory(decoded) : ctx.server->ReserveClientMemory(decoded);
    if (!ok) {
      ctx.reply->Error(kErrClientMemory);
      return false;
    }
  }
  return true;
}

void VStoreBatch(CommandContext& ctx) {
  auto a = ctx.args;
  uint32_t layer;
  if (!ParseLayer(ctx, a[2], &layer)) return;
  int64_t start, count;
  if (!ArgInRange(ctx, a[3], 0, kMaxTokens, kErrStoreStartRange, &start)) return;
  if (!ArgInRange(ctx, a[4], 1, kMaxTokens, kErrStoreCountRange, &count)) return;
  if (start + count > kMaxTokens) {
    ctx.reply->Error(kErrStoreEndRange);
    return;
  }
  store::RowInput in;
  in.type = store::RowInput::Type::kF32;
  if (a.size() > 6) {
    if (a.size() != 8 || !IsKeyword(a[6], "FMT") ||
        !(IsKeyword(a[7], "F32") || IsKeyword(a[7], "F16"))) {
      ctx.reply->Error(kErrStoreBatchOption);
      return;
    }
    if (IsKeyword(a[7], "F16")) in.type = store::RowInput::Type::kF16;
  }
  in.data = a[5].data();
  in.bytes = a[5].size();
  uint64_t lsn = 0;
  Status st = ctx.server->store()->StoreRows(a[1], layer, static_cast<uint64_t>(start),
                                             static_cast<uint64_t>(count), in, &lsn);
  ctx.wait_lsn = lsn;
  if (!st.ok()) {
    if (st.id() == ErrorId::kSizeMismatch) return ctx.reply->Error(StoreBatchError(st.message()));
    return ReplyStatus(ctx, st);
  }
  ctx.reply->SimpleString("OK");
}

// Splits a trailing "FMT <x>" pair off `args`; false (and replied) on a bad value.
bool TakeFmt(CommandContext& ctx, std::span<const std::string_view>* args, OutFmt* fmt) {
  *fmt = OutFmt::kF32;
  auto& a = *args;
  if (a.size() >= 2 && IsKeyword(a[a.size() - 2], "FMT")) {
    if (!ParseOutFmt(ctx, a.back(), fmt)) return false;
    a = a.first(a.size() - 2);
  }
  return true;
}

void VFetchRange(CommandContext& ctx, std::span<const std::string_view> a, OutFmt fmt) {
  // a: V.FETCH sid layer RANGE start end
  if (a.size() != 6) {
    ctx.reply->Error(kErrFetchRangeArgs);
    return;
  }
  uint32_t layer;
  if (!ParseLayer(ctx, a[2], &layer)) return;
  int64_t start, end;
  if (!ArgInRange(ctx, a[4], 0, kMaxTokens, kErrFetchRangeOrder, &start) ||
      !ArgInRange(ctx, a[5], 0, kMaxTokens, kErrFetchRangeOrder, &end))
    return;
  if (end <= start) {
    ctx.reply->Error(kErrFetchRangeOrder);
    return;
  }
  auto plan = ctx.server->store()->FetchRange(a[1], layer, static_cast<uint64_t>(start),
                                              static_cast<uint64_t>(end));
  if (!plan.ok()) return ReplyStatus(ctx, plan.status());
  if (!CheckReply(ctx, std::span<const FetchPlan>(&*plan, 1), fmt)) return;
  ctx.server->receipt().RecordBytesServed(ReplyPlan(ctx, std::move(*plan), fmt));
}

void VFetchBatch(CommandContext& ctx, std::span<const std::string_view> a, OutFmt fmt) {
  // a: V.FETCH sid BATCH start end [num_layers]
  if (a.size() != 5 && a.size() != 6) {
    ctx.reply->Error(kErrFetchBatchArgs);
    return;
  }
  int64_t start, end, layers = 0;
  if (!ArgInRange(ctx, a[3], 0, kMaxTokens, kErrFetchBatchOrder, &start) ||
      !ArgInRange(ctx, a[4], 0, kMaxTokens, kErrFetchBatchOrder, &end))
    return;
  if (end <= start) {
    ctx.reply->Error(kErrFetchBatchOrder);
    return;
  }
  if (a.size() == 6 && !ArgInRange(ctx, a[5], 1, store::kMaxLayers, kErrNumLayersRange, &layers))
    return;
  auto plans =
      ctx.server->store()->FetchBatch(a[1], static_cast<uint64_t>(start),
                                      static_cast<uint64_t>(end), static_cast<uint32_t>(layers));
  if (!plans.ok()) {
    if (plans.status().id() == ErrorId::kNothingStored)
      return ctx.reply->Error(kErrFetchBatchNoLayers);
    return ReplyStatus(ctx, plans.status());
  }
  if (!CheckReply(ctx, *plans, fmt)) return;
  ctx.reply->ArrayHeader(plans->size());
  uint64_t served = 0;
  for (FetchPlan& p : *plans) served += ReplyPlan(ctx, std::move(p), fmt);
  ctx.server->receipt().RecordBytesServed(served);
}

void VFetchIds(CommandContext& ctx, std::span<const std::string_view> a, OutFmt fmt) {
  // a: V.FETCH sid layer id [id ...]
  if (fmt == OutFmt::kNative) {
    ctx.reply->Error(kErrNativeNeedsRange);
    return;
  }
  uint32_t layer;
  if (!ParseLayer(ctx, a[2], &layer)) return;
  if (a.size() < 4) {
    ctx.reply->Error(kErrNoTokenIds);
    return;
  }
  if (a.size() - 3 > kMaxIds) {
    ctx.reply->Error(kErrTooManyTokenIds);
    return;
  }
  // A few ids (the common case) on the stack: no allocation (issue 15).
  constexpr size_t kInlineIds = 32;
  uint64_t inline_ids[kInlineIds];
  std::vector<uint64_t> heap_ids;
  const size_t count = a.size() - 3;
  if (count > kInlineIds) heap_ids.resize(count);
  std::span<uint64_t> ids(count > kInlineIds ? heap_ids.data() : inline_ids, count);
  for (size_t i = 3; i < a.size(); ++i) {
    int64_t v;
    if (!ArgInRange(ctx, a[i], 0, kMaxTokens - 1, kErrTokenIdRange, &v)) return;
    ids[i - 3] = static_cast<uint64_t>(v);
  }
  auto plan = ctx.server->store()->FetchIds(a[1], layer, ids);
  if (!plan.ok()) return ReplyStatus(ctx, plan.status());
  if (!CheckReply(ctx, std::span<const FetchPlan>(&*plan, 1), fmt)) return;
  ctx.server->receipt().RecordBytesServed(ReplyPlan(ctx, std::move(*plan), fmt));
}

void VFetch(CommandContext& ctx) {
  std::span<const std::string_view> a = ctx.args;
  OutFmt fmt;
  if (!TakeFmt(ctx, &a, &fmt)) return;
  if (a.size() < 3) {
    ctx.reply->Error(kErrFetchArgs);
    return;
  }
  if (IsKeyword(a[2], "BATCH")) return VFetchBatch(ctx, a, fmt);
  if (a.size() >= 4 && IsKeyword(a[3], "RANGE")) return VFetchRange(ctx, a, fmt);
  VFetchIds(ctx, a, fmt);
}

void VInfo(CommandContext& ctx) {
  std::string out;
  auto line = [&](std::string_view k, std::string_view v) { InfoField(&out, k, v); };
  store::Store* st = ctx.server->store();
  if (ctx.args.size() == 1) {
    // Server-wide counters: only for a user that may see every key.
    const AclUser* u = ctx.server->ClientUser(ctx.client);
    if (u == nullptr || !u->allkeys) {
      ctx.reply->Error(kErrNoPermKey);
      return;
    }
    store::StoreStats s = st->Stats();
    line("enabled", "1");
    line("sessions", std::to_string(s.sessions));
    line("total_tokens", std::to_string(s.total_tokens));
    line("total_fetches", std::to_string(s.total_fetches));
    line("bytes", std::to_string(s.bytes));
    ctx.reply->Bulk(out);
    return;
  }
  auto info = st->Info(ctx.args[1]);
  if (!info.ok()) return ReplyStatus(ctx, info.status());
  line("value_dim", std::to_string(info->dim));
  line("v_format", quant::FormatName(info->fmt));
  line("bytes_per_token", std::to_string(quant::RowBytes(info->fmt, info->dim)));
  line("num_layers", std::to_string(info->num_layers));
  line("schema", "uniform");
  for (size_t i = 0; i < info->layer_tokens.size(); ++i)
    if (info->layer_tokens[i] > 0)
      line("layer_" + std::to_string(i) + "_tokens", std::to_string(info->layer_tokens[i]));
  line("total_tokens", std::to_string(info->total_tokens));
  line("bytes", std::to_string(info->bytes));
  ctx.reply->Bulk(out);
}

}  // namespace

void AddVStoreCommands(std::vector<CommandSpec>* out) {
  const uint32_t kv = kCmdKvcache;
  size_t first = out->size();
  out->push_back({"V.STOREBATCH", -6, kCmdWrite | kCmdDenyOom | kv, 1, 1, 1, VStoreBatch,
                  "Store rows [start, start+count) of one layer (FMT F32|F16)"});
  out->push_back({"V.FETCH", -4, kCmdReadonly | kv, 1, 1, 1, VFetch,
                  "Fetch rows: RANGE, BATCH or an id list (FMT NATIVE|F32|F16)"});
  out->push_back({"V.INFO", -1, kCmdReadonly | kCmdFast | kv, 1, 1, 1, VInfo,
                  "V-store counters, or one session's layout"});
  for (size_t i = first; i < out->size(); ++i) {
    (*out)[i].acl_key_flags |= kAclKeyNamespace;
    (*out)[i].acl_categories |= kAclKvcache;
  }
}

}  // namespace pion::server
