// The Stage-1 commands of pion-server, as Redis module commands over the
// pion-kvns data type: the same grammar, limits, replies and error texts
// (kvproto/errors.h), the same store and quant code. The server's
// handlers are the reference (server/commands/kvprefix.cc, vstore.cc,
// stats.cc); where the module differs it says so (docs/cluster.md):
//  * the Redis key is the namespace; V.* commands name "<ns>_pk"/"<ns>_pv", route
//    on it, and open the key <ns>. In a cluster both must hash to one slot, or
//    the command answers CROSSSLOT naming the hash-tag rule;
//  * replies are copied into Redis's output buffer (no zero-copy send);
//  * persistence and replication are Redis's: every mutation that succeeded is
//    replicated verbatim (and so appended to the AOF);
//  * receipts (PION.STATS) and KV.PREFIX.INFO counters are this node's.
#include "module/commands.h"

#include <cstring>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "base/clock.h"
#include "base/keyslot.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "kvproto/kv_format.h"
#include "kvproto/pion_commands.h"
#include "kvproto/receipt.h"
#include "module/ns_value.h"
#include "module/redis_api.h"
#include "quant/format.h"
#include "store/namespace.h"
#include "store/session_id.h"

namespace pion::module {

namespace {

using redis::api;
using store::FetchPlan;
using store::FetchSegment;
using store::Side;
namespace srv = pion::server;

using srv::FetchArgs;
using srv::OutFmt;
constexpr int64_t kMaxTokens = static_cast<int64_t>(store::kMaxTokens);

srv::Receipt g_receipt;
uint64_t g_start_us = 0;

// One command call: the arguments as views, the context, the reply helpers.
struct Call {
  RedisModuleCtx* ctx;
  RedisModuleString** argv;
  std::vector<std::string_view> a;

  Call(RedisModuleCtx* c, RedisModuleString** v, int n) : ctx(c), argv(v), a(n) {
    for (int i = 0; i < n; ++i) {
      size_t len = 0;
      const char* p = api.StringPtrLen(v[i], &len);
      a[i] = std::string_view(p, len);
    }
  }
  int Error(std::string_view e) {
    std::string s(e);
    api.ReplyWithError(ctx, s.c_str());
    return redis::kOk;
  }
  int Status(const pion::Status& st) { return Error(srv::StatusToError(st)); }
  // The error callback of the shared parsers (kvproto/kv_format.h).
  srv::ErrorFn Errors() {
    return [this](std::string_view e) { Error(e); };
  }
  int Simple(const char* s) {
    api.ReplyWithSimpleString(ctx, s);
    return redis::kOk;
  }
  int Bulk(const void* p, size_t n) {
    api.ReplyWithStringBuffer(ctx, static_cast<const char*>(p), n);
    return redis::kOk;
  }
  bool InCluster() const { return (api.GetContextFlags(ctx) & redis::kCtxCluster) != 0; }
};

// pion-server's admission arity check (same text).
bool CheckArity(Call& c, int arity) {
  int n = static_cast<int>(c.a.size());
  if ((arity > 0 && n != arity) || (arity < 0 && n < -arity)) {
    c.Error(srv::WrongArity(c.a[0]));
    return false;
  }
  return true;
}

bool ArgInRange(Call& c, std::string_view arg, int64_t lo, int64_t hi, std::string_view range_error,
                int64_t* out) {
  return srv::IntArgInRange(c.Errors(), arg, lo, hi, range_error, out);
}

bool IsKeyword(std::string_view arg, std::string_view kw) { return EqualsIgnoreCase(arg, kw); }

// An open key, closed at scope end.
class Key {
 public:
  Key(RedisModuleCtx* ctx, RedisModuleString* name, int mode)
      : k_(static_cast<RedisModuleKey*>(api.OpenKey(ctx, name, mode))) {}
  ~Key() {
    if (k_ != nullptr) api.CloseKey(k_);
  }
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;
  bool empty() const { return k_ == nullptr || api.KeyType(k_) == redis::kKeyEmpty; }
  // The namespace, or nullptr (then *wrong_type says whether the key holds
  // something else).
  NsValue* value(bool* wrong_type) const {
    *wrong_type = false;
    if (empty()) return nullptr;
    if (api.KeyType(k_) != redis::kKeyModule || api.ModuleTypeGetType(k_) != NsType()) {
      *wrong_type = true;
      return nullptr;
    }
    return static_cast<NsValue*>(api.ModuleTypeGetValue(k_));
  }
  RedisModuleKey* get() const { return k_; }

 private:
  RedisModuleKey* k_;
};

// A Redis string for `s`, freed at scope end.
class OwnedString {
 public:
  OwnedString(RedisModuleCtx* ctx, std::string_view s)
      : ctx_(ctx), s_(api.CreateString(ctx, s.data(), s.size())) {}
  ~OwnedString() { api.FreeString(ctx_, s_); }
  OwnedString(const OwnedString&) = delete;
  OwnedString& operator=(const OwnedString&) = delete;
  RedisModuleString* get() const { return s_; }

 private:
  RedisModuleCtx* ctx_;
  RedisModuleString* s_;
};

bool CheckNsLength(Call& c, std::string_view ns) { return srv::CheckNsLength(c.Errors(), ns); }

// In a cluster, a namespace and its session ids must share a slot.
bool CheckSameSlot(Call& c, std::string_view ns) {
  if (!c.InCluster()) return true;
  std::string k(ns), v(ns);
  k += "_pk";
  v += "_pv";
  uint32_t slot = KeySlot(ns);
  if (KeySlot(k) == slot && KeySlot(v) == slot) return true;
  c.Error(srv::CrossSlotNamespaceError(ns));
  return false;
}

// --- KV.PREFIX.* ----------------------------------------------------------------

int KvRegister(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -4)) return redis::kOk;
  auto& a = c.a;
  store::RegisterArgs ra;
  ra.ns = kInternalNs;
  // PARENT is pion-server's (a module namespace is one key: no links).
  if (!srv::ParseRegister(c.Errors(), a, nullptr, &ra)) return redis::kOk;
  if (!CheckSameSlot(c, a[1])) return redis::kOk;
  Key key(ctx, argv[1], redis::kRead | redis::kWrite);
  bool wrong = false;
  NsValue* v = key.value(&wrong);
  if (wrong) return c.Error(srv::kErrWrongType);
  if (v == nullptr) {
    std::shared_ptr<store::Namespace> ns;
    pion::Status st = store::RegisterUnshared(ra, &ns);
    if (!st.ok()) return c.Status(st);
    std::unique_ptr<NsValue, void (*)(NsValue*)> fresh(NewNsValue(std::move(ns)), DeleteNsValue);
    if (api.ModuleTypeSetValue(key.get(), NsType(), fresh.get()) != redis::kOk)
      return c.Error(srv::kErrModuleSetKey);
    fresh.release();
  } else {
    pion::Status st = store::RegisterUnshared(ra, &v->ns);
    if (!st.ok()) return c.Status(st);
    Reaccount(v);
  }
  api.ReplicateVerbatim(ctx);
  return c.Simple("OK");
}

int KvLookup(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -2)) return redis::kOk;
  srv::LookupArgs la;
  if (!srv::ParseLookup(c.Errors(), c.a, /*allow_chain=*/false, &la)) return redis::kOk;
  Key key(ctx, argv[1], redis::kRead);
  bool wrong = false;
  NsValue* v = key.value(&wrong);
  if (wrong) return c.Error(srv::kErrWrongType);
  store::LookupResult lr;
  if (v != nullptr) lr = store::LookupOf(*v->ns);
  if (!lr.hit) {
    g_receipt.RecordMiss();
    return c.Simple("MISS");
  }
  uint64_t credit_tokens = 0, credit_us = 0;
  srv::LookupCredit(lr, la, &credit_tokens, &credit_us);
  g_receipt.RecordHit(credit_tokens, credit_us);
  return c.Simple("HIT");
}

int KvDrop(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -2)) return redis::kOk;
  long long dropped = 0;
  for (int i = 1; i < argc; ++i) {
    Key key(ctx, argv[i], redis::kRead | redis::kWrite);
    bool wrong = false;
    if (key.value(&wrong) == nullptr) continue;  // absent, or not a namespace: left alone
    api.DeleteKey(key.get());
    ++dropped;
  }
  if (dropped > 0) api.ReplicateVerbatim(ctx);
  api.ReplyWithLongLong(ctx, dropped);
  return redis::kOk;
}

// The block table of the namespace at argv[1], or nullptr (replied UNKNOWN or an error).
std::shared_ptr<const store::BlockTable> TableOf(Call& c) {
  Key key(c.ctx, c.argv[1], redis::kRead);
  bool wrong = false;
  NsValue* v = key.value(&wrong);
  if (wrong) {
    c.Error(srv::kErrWrongType);
    return nullptr;
  }
  const std::shared_ptr<const store::BlockTable>* t =
      v != nullptr ? store::NonEmptyBlocks(*v->ns) : nullptr;
  if (t == nullptr) {
    c.Simple("UNKNOWN");
    return nullptr;
  }
  return *t;
}

int KvBlocks(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, 2)) return redis::kOk;
  if (!CheckNsLength(c, c.a[1])) return redis::kOk;
  auto table = TableOf(c);
  if (!table) return redis::kOk;
  size_t n = table->hashes.size();
  std::string out(8 + 8 * n, '\0');
  uint32_t hdr[2] = {table->block_size, static_cast<uint32_t>(n)};
  std::memcpy(out.data(), hdr, 8);
  std::memcpy(out.data() + 8, table->hashes.data(), 8 * n);
  return c.Bulk(out.data(), out.size());
}

int KvMembership(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, 4)) return redis::kOk;
  if (!CheckNsLength(c, c.a[1])) return redis::kOk;
  std::vector<uint64_t> probes;
  if (!srv::ParseHashes(c.Errors(), c.a[2], c.a[3], srv::kErrHashCountRange,
                        srv::kErrHashBlobLength, &probes))
    return redis::kOk;
  auto table = TableOf(c);
  if (!table) return redis::kOk;
  std::string out((probes.size() + 7) / 8, '\0');
  table->ContainsEach(reinterpret_cast<const uint8_t*>(probes.data()), probes.size(),
                      reinterpret_cast<uint8_t*>(out.data()));
  return c.Bulk(out.data(), out.size());
}

// KV.PREFIX.INFO <ns>: pion-server's per-namespace lines. A module namespace has no
// parent (REGISTER ... PARENT is pion-server's), so its chain is itself.
int KvInfoOf(Call& c, RedisModuleCtx* ctx, RedisModuleString* name) {
  if (!CheckNsLength(c, c.a[1])) return redis::kOk;
  Key key(ctx, name, redis::kRead);
  bool wrong = false;
  NsValue* v = key.value(&wrong);
  if (wrong) return c.Error(srv::kErrWrongType);
  if (v == nullptr) return c.Simple("UNKNOWN");
  store::NamespaceInfo info;  // no children, not on disk: a module namespace has neither
  store::DescribeChain(*v->ns, &info);
  std::string out = srv::NamespaceInfoBody(c.a[1], info);
  return c.Bulk(out.data(), out.size());
}

int KvInfo(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -1)) return redis::kOk;
  if (c.a.size() > 2) return c.Error(srv::kErrSyntaxError);
  if (c.a.size() == 2) return KvInfoOf(c, ctx, argv[1]);
  ModuleTotals& t = Totals();
  constexpr auto kR = std::memory_order_relaxed;
  uint64_t ns = t.namespaces.load(kR);
  std::string out;
  srv::InfoField(&out, "registered_prefixes", ns);
  srv::InfoField(&out, "total_prefix_tokens", t.prefix_tokens.load(kR));
  srv::InfoField(&out, "vstore_sessions", 2 * ns);
  srv::InfoField(&out, "vstore_max_sessions", 0);  // unbounded: Redis's maxmemory bounds the node
  srv::InfoField(&out, "vstore_total_fetches", t.fetches.load(kR));
  // Evictions are Redis's (maxmemory-policy): INFO stats evicted_keys counts them.
  srv::InfoField(&out, "vstore_evictions", 0);
  srv::InfoField(&out, "vstore_bytes", t.bytes.load(kR));
  srv::InfoField(&out, "maxmemory", 0);  // Redis's own (CONFIG GET maxmemory)
  // Persistence is Redis's (RDB/AOF): pion's WAL is not used in the module.
  srv::InfoField(&out, "wal_enabled", 0);
  srv::InfoField(&out, "wal_bytes", 0);
  srv::InfoField(&out, "wal_appended", 0);
  srv::InfoField(&out, "wal_replayed", 0);
  srv::InfoField(&out, "last_save_unix", 0);
  srv::InfoField(&out, "module", "pion.so");
  return c.Bulk(out.data(), out.size());
}

// --- V.* ---------------------------------------------------------------------------

// The namespace a session id names, opened for `mode`; nullptr when the
// command was answered (unknown session, CROSSSLOT, wrong type).
struct Session {
  std::unique_ptr<OwnedString> ns_name;
  std::unique_ptr<Key> key;
  NsValue* v = nullptr;
  Side side = Side::kKeys;
};

// Whether this node is importing `slot` (a reshard moving it here): CLUSTER NODES'
// "myself" line lists "[<slot>-<-<node>]" for it. Asked only on a miss.
bool ImportingSlot(RedisModuleCtx* ctx, uint32_t slot) {
  RedisModuleCallReply* r = api.Call(ctx, "CLUSTER", "c", "NODES");
  if (r == nullptr) return false;
  size_t len = 0;
  const char* p = api.CallReplyStringPtr(r, &len);
  bool importing = false;
  if (p != nullptr) {
    std::string_view all(p, len);
    const std::string mark = "[" + std::to_string(slot) + "-<-";
    for (size_t pos = 0; pos < all.size();) {
      size_t nl = all.find('\n', pos);
      std::string_view line =
          all.substr(pos, nl == std::string_view::npos ? all.size() - pos : nl - pos);
      if (line.find("myself") != std::string_view::npos) {
        importing = line.find(mark) != std::string_view::npos;
        break;
      }
      if (nl == std::string_view::npos) break;
      pos = nl + 1;
    }
  }
  api.FreeCallReply(r);
  return importing;
}

bool OpenSession(Call& c, std::string_view sid, int mode, Session* s) {
  std::string_view ns;
  Side side;
  if (!store::ParseSessionId(sid, &ns, &side)) {
    c.Error(srv::kErrSessionNotFound);
    return false;
  }
  if (c.InCluster() && KeySlot(ns) != KeySlot(sid)) {
    c.Error(srv::CrossSlotNamespaceError(ns));
    return false;
  }
  s->ns_name = std::make_unique<OwnedString>(c.ctx, ns);
  s->key = std::make_unique<Key>(c.ctx, s->ns_name->get(), mode);
  bool wrong = false;
  s->v = s->key->value(&wrong);
  if (wrong) {
    c.Error(srv::kErrWrongType);
    return false;
  }
  if (s->v == nullptr) {
    // Redis ASKs every V.* command on a migrating slot over to the importing node
    // (the session id is never a key of its own); until the namespace arrives there,
    // ask the client to retry instead of reporting it missing.
    if (c.InCluster() && ImportingSlot(c.ctx, KeySlot(ns)))
      c.Error(srv::kErrTryAgainMigrating);
    else
      c.Error(srv::kErrSessionNotFound);
    return false;
  }
  s->side = side;
  return true;
}

bool ParseLayer(Call& c, std::string_view arg, uint32_t* layer) {
  return srv::ParseLayer(c.Errors(), arg, layer);
}

int VStoreBatch(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -6)) return redis::kOk;
  auto& a = c.a;
  srv::StoreBatchArgs sb;
  if (!srv::ParseStoreBatch(c.Errors(), a, &sb)) return redis::kOk;
  Session s;
  if (!OpenSession(c, a[1], redis::kRead | redis::kWrite, &s)) return redis::kOk;
  pion::Status st = store::StoreRowsUnshared(*s.v->ns, s.side, sb.layer, sb.start, sb.count, sb.in);
  if (!st.ok()) return c.Status(st);
  Reaccount(s.v);
  api.ReplicateVerbatim(ctx);
  return c.Simple("OK");
}

// One layer's rows as a bulk string (a null when no requested row is stored).
// Returns the payload bytes sent, or -1 after an error reply.
int64_t ReplyPlan(Call& c, const FetchPlan& plan, OutFmt fmt) {
  if (plan.stored_rows == 0) {
    api.ReplyWithNull(c.ctx);
    return 0;
  }
  const uint64_t len = srv::BodyBytes(plan, fmt);
  std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[len == 0 ? 1 : len]);
  if (!buf) {
    c.Error(srv::kErrNoMemory);
    return -1;
  }
  const bool raw = plan.fmt == quant::Format::kFp16 && fmt != OutFmt::kF32;
  const size_t elem = srv::ElemBytes(plan, fmt);
  uint8_t* out = buf.get();
  for (const FetchSegment& s : plan.segments) {
    size_t n = s.rows * plan.dim * elem;
    if (s.data == nullptr)
      std::memset(out, 0, n);
    else if (raw)
      std::memcpy(out, s.data, n);
    else if (elem == 4)
      quant::DecodeRows(plan.fmt, s.data, s.rows, plan.dim, out);
    else
      quant::DecodeRowsF16(plan.fmt, s.data, s.rows, plan.dim, out);
    out += n;
  }
  c.Bulk(buf.get(), len);
  return static_cast<int64_t>(len);
}

bool CheckReplySize(Call& c, const std::vector<FetchPlan>& plans, OutFmt fmt) {
  uint64_t body = 0;
  for (const FetchPlan& p : plans) body += srv::BodyBytes(p, fmt);
  if (body > srv::kMaxFetchReplyBytes) {
    c.Error(srv::kErrFetchReplyTooBig);
    return false;
  }
  return true;
}

// Rows of a V.FETCH whose arguments were checked (srv::ParseFetch).
int VFetchPlans(Call& c, const FetchArgs& fa) {
  Session s;
  if (!OpenSession(c, c.a[1], redis::kRead, &s)) return redis::kOk;
  store::Namespace& n = *s.v->ns;
  std::vector<FetchPlan> plans;
  uint64_t fetched = 0;
  if (fa.kind == FetchArgs::Kind::kBatch) {
    auto r = n.PlanLayers(s.side, fa.start, fa.end, fa.layers);
    if (!r.ok()) return c.Status(r.status());
    plans = std::move(*r);
    fetched = (fa.end - fa.start) * plans.size();
  } else if (fa.kind == FetchArgs::Kind::kRange) {
    plans.push_back(n.PlanRange(s.side, fa.layer, fa.start, fa.end));
    fetched = fa.end - fa.start;
  } else {
    plans.push_back(n.PlanIds(s.side, fa.layer, fa.ids()));
    fetched = fa.ids().size();
  }
  Totals().fetches.fetch_add(fetched, std::memory_order_relaxed);
  if (!CheckReplySize(c, plans, fa.fmt)) return redis::kOk;
  if (fa.kind == FetchArgs::Kind::kBatch)
    api.ReplyWithArray(c.ctx, static_cast<long>(plans.size()));
  uint64_t served = 0;
  for (const FetchPlan& p : plans) {
    const int64_t sent = ReplyPlan(c, p, fa.fmt);
    if (sent > 0) served += static_cast<uint64_t>(sent);
  }
  if (fa.kind == FetchArgs::Kind::kBatch || served > 0) g_receipt.RecordBytesServed(served);
  return redis::kOk;
}

int VFetch(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -4)) return redis::kOk;
  FetchArgs fa;
  if (!srv::ParseFetch(c.Errors(), c.a, &fa)) return redis::kOk;
  return VFetchPlans(c, fa);
}

int VInfo(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -1)) return redis::kOk;
  if (c.a.size() == 1) {
    ModuleTotals& t = Totals();
    constexpr auto kR = std::memory_order_relaxed;
    std::string out = srv::VStoreTotalsBody(2 * t.namespaces.load(kR), t.total_tokens.load(kR),
                                            t.fetches.load(kR), t.bytes.load(kR));
    return c.Bulk(out.data(), out.size());
  }
  Session s;
  if (!OpenSession(c, c.a[1], redis::kRead, &s)) return redis::kOk;
  std::string out = srv::SessionInfoBody(s.v->ns->Describe(s.side));
  return c.Bulk(out.data(), out.size());
}

// --- PION.STATS, PION.LOADROWS -----------------------------------------------------------

int PionStats(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -1)) return redis::kOk;
  if (c.a.size() >= 2 && IsKeyword(c.a[1], "RESET")) {
    g_receipt.Reset();
    return c.Simple("OK");
  }
  srv::ReceiptSnapshot s = g_receipt.Read();
  uint64_t uptime = (MonotonicUs() - g_start_us) / 1000000;
  if (api.ReplyWithMap != nullptr)
    api.ReplyWithMap(ctx, static_cast<long>(srv::kReceiptFields));
  else
    api.ReplyWithArray(ctx, static_cast<long>(2 * srv::kReceiptFields));
  for (const srv::ReceiptField& f : srv::ReceiptFields(s, uptime)) {
    api.ReplyWithStringBuffer(ctx, f.name.data(), f.name.size());
    if (f.seconds_text) {
      const std::string v = srv::Receipt::SecondsText(f.value);
      api.ReplyWithStringBuffer(ctx, v.data(), v.size());
    } else {
      api.ReplyWithLongLong(ctx, static_cast<long long>(f.value));
    }
  }
  return redis::kOk;
}

// PION.LOADROWS ns K|V layer start stored_blob: rows already in the namespace's
// stored form (what an AOF rewrite emits, docs/module_format.md); no re-encoding.
int PionLoadRows(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, 6)) return redis::kOk;
  auto& a = c.a;
  if (!CheckNsLength(c, a[1])) return redis::kOk;
  Side side;
  if (IsKeyword(a[2], "K"))
    side = Side::kKeys;
  else if (IsKeyword(a[2], "V"))
    side = Side::kValues;
  else
    return c.Error(srv::kErrLoadRowsSide);
  uint32_t layer;
  if (!ParseLayer(c, a[3], &layer)) return redis::kOk;
  int64_t start;
  if (!ArgInRange(c, a[4], 0, kMaxTokens - 1, srv::kErrStoreStartRange, &start)) return redis::kOk;
  Key key(ctx, argv[1], redis::kRead | redis::kWrite);
  bool wrong = false;
  NsValue* v = key.value(&wrong);
  if (wrong) return c.Error(srv::kErrWrongType);
  if (v == nullptr) return c.Error(srv::kErrSessionNotFound);
  const size_t rb = v->ns->row_bytes;
  const std::string_view blob = a[5];
  if (blob.empty() || blob.size() % rb != 0) return c.Error(srv::kErrLoadRowsBlob);
  const uint64_t count = blob.size() / rb;
  if (static_cast<uint64_t>(start) + count > store::kMaxTokens)
    return c.Error(srv::kErrStoreEndRange);
  pion::Status st =
      store::ApplyStoredUnshared(*v->ns, side, layer, static_cast<uint64_t>(start), count,
                                 {reinterpret_cast<const uint8_t*>(blob.data()), blob.size()});
  if (!st.ok()) return c.Status(st);
  Reaccount(v);
  api.ReplicateVerbatim(ctx);
  return c.Simple("OK");
}

// KV.BLOCK.MATCH numkeys key [key ...] [BITMAP]: as pion-server's
// (server/commands/kvblock.cc) over Redis string keys, without PIN. The keys
// are named to Redis through the getkeys API, so a cluster routes the command
// by them (one slot: a hash tag) and answers CROSSSLOT otherwise. Opening a
// key for reading is an access for Redis's LRU/LFU, as pion's MATCH touches.
constexpr int64_t kMaxMatchKeys = 1048576;

int KvBlockMatch(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (api.IsKeysPositionRequest(ctx) != 0) {
    size_t len = 0;
    const char* p = argc > 1 ? api.StringPtrLen(argv[1], &len) : nullptr;
    auto nk = p != nullptr ? ParseInt64Strict(std::string_view(p, len)) : std::nullopt;
    if (nk && *nk > 0 && *nk <= argc - 2)
      for (int i = 0; i < *nk; ++i) api.KeyAtPos(ctx, 2 + i);
    return redis::kOk;
  }
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -3)) return redis::kOk;
  auto nk = ParseInt64Strict(c.a[1]);
  if (!nk || *nk <= 0) return c.Error(srv::kErrNumkeysPositive);
  if (*nk > kMaxMatchKeys) return c.Error(srv::kErrNumkeysRange);
  const size_t n = static_cast<size_t>(*nk);
  if (n > c.a.size() - 2) return c.Error(srv::kErrNumkeysArgs);
  bool bitmap = false, pin = false;
  for (size_t i = 2 + n; i < c.a.size(); ++i) {
    if (IsKeyword(c.a[i], "BITMAP") && !bitmap) {
      bitmap = true;
    } else if (IsKeyword(c.a[i], "PIN") && !pin && i + 1 < c.a.size()) {
      pin = true;
      ++i;
    } else {
      return c.Error(srv::kErrSyntaxError);
    }
  }
  if (pin) return c.Error(srv::kErrPinInModule);
  std::string bits(bitmap ? (n + 7) / 8 : 0, '\0');
  uint64_t count = 0;
  bool run = true;
  for (size_t i = 0; i < n && (bitmap || run); ++i) {
    Key k(ctx, argv[2 + i], redis::kRead);
    const bool live = k.get() != nullptr && api.KeyType(k.get()) == redis::kKeyString;
    if (!live) {
      run = false;
      continue;
    }
    if (run) ++count;
    if (bitmap) bits[i >> 3] = static_cast<char>(bits[i >> 3] | (1u << (i & 7)));
  }
  if (bitmap) return c.Bulk(bits.data(), bits.size());
  api.ReplyWithLongLong(ctx, static_cast<long long>(count));
  return redis::kOk;
}

}  // namespace

bool RegisterCommands(RedisModuleCtx* ctx) {
  g_start_us = MonotonicUs();
  // Each command the module serves, by its row in kvproto/pion_commands.h
  // (flags and key positions come from there, as pion-server's do).
  struct Handler {
    const char* name;
    redis::CmdFunc fn;
  };
  const Handler handlers[] = {
      {"KV.PREFIX.REGISTER", KvRegister},
      {"KV.PREFIX.LOOKUP", KvLookup},
      {"KV.PREFIX.DROP", KvDrop},
      {"KV.PREFIX.BLOCKS", KvBlocks},
      {"KV.PREFIX.MEMBERSHIP", KvMembership},
      {"KV.PREFIX.INFO", KvInfo},
      {"V.STOREBATCH", VStoreBatch},
      {"V.FETCH", VFetch},
      {"V.INFO", VInfo},
      {"PION.STATS", PionStats},
      {"PION.LOADROWS", PionLoadRows},
      {"KV.BLOCK.MATCH", KvBlockMatch},
  };
  size_t served = 0;
  for (const server::PionCommandRow& r : server::PionCommandRows()) {
    if (r.module == server::ModuleForm::kAbsent) continue;
    redis::CmdFunc fn = nullptr;
    for (const Handler& h : handlers)
      if (std::string_view(h.name) == r.name) fn = h.fn;
    PION_CHECK_MSG(fn != nullptr, r.name);  // a row marked for the module needs its handler
    ++served;
    const bool keys =
        r.module == server::ModuleForm::kSame || r.module == server::ModuleForm::kOnly;
    const std::string flags = server::ModuleCommandFlags(r);
    if (api.CreateCommand(ctx, r.name, fn, flags.c_str(), keys ? r.first_key : 0,
                          keys ? r.last_key : 0, keys ? r.key_step : 0) != redis::kOk)
      return false;
  }
  PION_CHECK_MSG(served == std::size(handlers), "a module handler without a row");
  return true;
}

}  // namespace pion::module
