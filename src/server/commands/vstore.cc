// V.* (docs/protocol.md "V-store"): rows in and out of the V-store. A fetch pins the chunks
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
#include "net/client_control.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/kv_events.h"
#include "store/prefix_ops.h"

namespace pion::server {

namespace {

using store::Chunk;
using store::FetchPlan;
using store::FetchSegment;

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
  CommandEnv* env = nullptr;
  ~DecodedRows() {
    if (env != nullptr) env->clients().AdjustMemory(-static_cast<int64_t>(buf.capacity()));
  }
};

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
    rows->env = ctx.env;
    ctx.env->clients().AdjustMemory(static_cast<int64_t>(rows->buf.capacity()));
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
  if (body > kMaxFetchReplyBytes) {
    ctx.reply->Error(kErrFetchReplyTooBig);
    return false;
  }
  constexpr uint64_t kGated = 1u << 20;
  if (decoded >= kGated) {
    ClientControl* c = ctx.client != nullptr ? ctx.client->control : nullptr;
    bool ok =
        c != nullptr ? c->ReserveMemory(decoded) : ctx.env->client_eviction().Reserve(decoded);
    if (!ok) {
      ctx.reply->Error(kErrClientMemory);
      return false;
    }
  }
  return true;
}

void VStoreBatch(CommandContext& ctx) {
  StoreBatchArgs sb;
  if (!ParseStoreBatch(ReplyErrors(ctx), ctx.args, &sb)) return;
  if (sb.in.type == store::RowInput::Type::kF16) {
    // F16 rows may become chunks by reference (the store takes whole,
    // aligned chunks of the received buffer instead of copying them): hand it
    // the buffer the blob was read into, and keep it pinned for the dispatch.
    // Only a buffer of about the blob's size: a larger one (a recycled block,
    // up to 2x) would pin memory the store does not count (chunk.h: within
    // ~1.25x of the bytes stored).
    OwnedBuffer b = ctx.TakeArg(ctx.args[5]);
    if (!b.empty()) {
      const bool sized = b.capacity() <= ctx.args[5].size() + ctx.args[5].size() / 4;
      auto owner = std::make_shared<OwnedBuffer>(std::move(b));
      ctx.pins.push_back(owner);  // the blob's bytes stay valid either way
      if (sized) sb.in.owner = std::move(owner);
    }
  }
  uint64_t lsn = 0;
  Status st = store::OpStoreRows({*ctx.env->store(), &lsn}, ctx.args[1], sb.layer, sb.start,
                                 sb.count, sb.in);
  ctx.wait_lsn = lsn;
  if (!st.ok()) return ReplyStatus(ctx, st);
  ctx.reply->SimpleString("OK");
}

void VFetch(CommandContext& ctx);

// V.FETCH of a namespace on disk: its extent is read and checked on a tier I/O
// thread while the worker serves others; on the worker, the namespace is then
// promoted (or dropped if damaged: the reply is the missing namespace's) and
// the command runs again on what is now in RAM, or on the mapping just checked.
void FetchAfterTierRead(CommandContext& ctx, store::Store::TierCheck chk) {
  std::shared_ptr<DeferredReply> done = ctx.Defer();
  CommandEnv* env = ctx.env;
  auto args = std::make_shared<const std::vector<std::string>>(ctx.args.begin(), ctx.args.end());
  env->store()->ReadTierCheck(chk, [env, done, args, chk](Result<OwnedBuffer> r, size_t at) {
    auto buf = std::make_shared<Result<OwnedBuffer>>(std::move(r));
    done->Complete([env, args, chk, buf, at](ReplyBuilder& rb) {
      std::vector<std::string_view> views(args->begin(), args->end());
      CommandContext again;
      again.args = views;
      again.reply = &rb;
      again.env = env;
      again.deferred = true;  // never deferred twice
      Status st = env->store()->ApplyTierCheck(chk, std::move(*buf), at);
      KvEvents::FlushThread();  // a damaged namespace's removal, outside the read batch
      if (!st.ok()) return ReplyStatus(again, st);
      store::Store::TierCheckedScope checked(chk.ns.get());
      VFetch(again);
    });
  });
}

void VFetch(CommandContext& ctx) {
  FetchArgs fa;
  if (!ParseFetch(ReplyErrors(ctx), ctx.args, &fa)) return;
  store::Store* st = ctx.env->store();
  std::string_view sid = ctx.args[1];
  if (ctx.CanDefer())
    if (auto chk = st->TierCheckFor(sid)) return FetchAfterTierRead(ctx, std::move(*chk));
  if (fa.kind == FetchArgs::Kind::kBatch) {
    auto plans = store::OpFetchBatch({*st}, sid, fa.start, fa.end, fa.layers);
    if (!plans.ok()) return ReplyStatus(ctx, plans.status());
    if (!CheckReply(ctx, *plans, fa.fmt)) return;
    ctx.reply->ArrayHeader(plans->size());
    uint64_t served = 0;
    for (FetchPlan& p : *plans) served += ReplyPlan(ctx, std::move(p), fa.fmt);
    ctx.env->receipt().RecordBytesServed(served);
    return;
  }
  auto plan = fa.kind == FetchArgs::Kind::kRange
                  ? store::OpFetchRange({*st}, sid, fa.layer, fa.start, fa.end)
                  : store::OpFetchIds({*st}, sid, fa.layer, fa.ids());
  if (!plan.ok()) return ReplyStatus(ctx, plan.status());
  if (!CheckReply(ctx, std::span<const FetchPlan>(&*plan, 1), fa.fmt)) return;
  ctx.env->receipt().RecordBytesServed(ReplyPlan(ctx, std::move(*plan), fa.fmt));
}

void VInfo(CommandContext& ctx) {
  store::Store* st = ctx.env->store();
  if (ctx.args.size() == 1) {
    // Server-wide counters: only for a user that may see every key.
    const AclUser* u = ctx.env->ClientUser(ctx.client);
    if (u == nullptr || !u->allkeys) {
      ctx.reply->Error(kErrNoPermKey);
      return;
    }
    store::StoreStats s = st->Stats();
    ctx.reply->Bulk(VStoreTotalsBody(s.sessions, s.total_tokens, s.total_fetches, s.bytes));
    return;
  }
  auto info = store::OpSessionInfo({*st}, ctx.args[1]);
  if (!info.ok()) return ReplyStatus(ctx, info.status());
  ctx.reply->Bulk(SessionInfoBody(*info));
}

}  // namespace

void AddVStoreCommands(std::vector<CommandSpec>* out) {
  const PionHandler handlers[] = {
      {"V.STOREBATCH", VStoreBatch}, {"V.FETCH", VFetch}, {"V.INFO", VInfo}};
  AddPionCommands(handlers, out);
}

}  // namespace pion::server
