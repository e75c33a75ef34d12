// The Stage-1 commands of pion-server, as Redis module commands over the
// pion-kvns data type: the same grammar, limits, replies and error texts
// (server/commands/errors.h), the same store and quant code. The server's
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
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/keyslot.h"
#include "base/strutil.h"
#include "module/ns_value.h"
#include "module/redis_api.h"
#include "quant/format.h"
#include "server/commands/errors.h"
#include "server/receipt.h"
#include "store/session_id.h"
#include "store/store.h"

namespace pion::module {

namespace {

using redis::api;
using store::FetchPlan;
using store::FetchSegment;
using store::Side;
namespace srv = pion::server;

constexpr int64_t kMaxPrefillMs = 86400000;
constexpr int64_t kMaxLookupTokens = 100000000;
constexpr int64_t kMaxLayer = store::kMaxLayers - 1;
constexpr int64_t kMaxTokens = static_cast<int64_t>(store::kMaxTokens);
constexpr size_t kMaxIds = 4096;
constexpr uint64_t kMaxReplyBytes = 1ull << 30;

srv::Receipt g_receipt;
uint64_t g_start_us = 0;

enum class OutFmt { kF32, kF16, kNative };

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
  auto v = ParseInt64Strict(arg);
  if (!v) {
    c.Error(srv::kErrNotInteger);
    return false;
  }
  if (*v < lo || *v > hi) {
    c.Error(range_error);
    return false;
  }
  *out = *v;
  return true;
}

bool IsKeyword(std::string_view arg, std::string_view kw) { return EqualsIgnoreCase(arg, kw); }

void InfoField(std::string* out, std::string_view name, std::string_view value) {
  out->append(name);
  out->push_back(':');
  out->append(value);
  out->append("\r\n");
}
void InfoField(std::string* out, std::string_view name, uint64_t value) {
  InfoField(out, name, std::to_string(value));
}

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

bool CheckNsLength(Call& c, std::string_view ns) {
  if (ns.empty() || ns.size() > store::kMaxNamespaceBytes) {
    c.Error(srv::kErrNsKeyLength);
    return false;
  }
  return true;
}

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

bool ParseHashes(Call& c, std::string_view count_arg, std::string_view blob,
                 std::string_view count_err, std::string_view len_err, std::vector<uint64_t>* out) {
  int64_t count;
  if (!ArgInRange(c, count_arg, 0, static_cast<int64_t>(store::kMaxHashCount), count_err, &count))
    return false;
  if (blob.size() != static_cast<size_t>(count) * 8) {
    c.Error(len_err);
    return false;
  }
  out->resize(count);
  if (count > 0) std::memcpy(out->data(), blob.data(), blob.size());
  return true;
}

// --- KV.PREFIX.* ----------------------------------------------------------------

int KvRegister(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -4)) return redis::kOk;
  auto& a = c.a;
  if (!CheckNsLength(c, a[1])) return redis::kOk;
  int64_t dim;
  if (!ArgInRange(c, a[2], 1, quant::kMaxDim, srv::kErrKvDimRange, &dim)) return redis::kOk;
  auto fmt = quant::ParseFormat(a[3]);
  if (!fmt) return c.Error(srv::UnknownVquantError(a[3]));
  if (!quant::DimSupported(*fmt, static_cast<uint32_t>(dim)))
    return c.Error(srv::VquantDimError(quant::FormatName(*fmt)));
  store::RegisterArgs ra;
  ra.ns = kInternalNs;
  ra.kv_dim = static_cast<uint32_t>(dim);
  ra.fmt = *fmt;
  auto table = std::make_shared<store::BlockTable>();
  bool have_blocks = false;
  for (size_t i = 4; i < a.size();) {
    if (IsKeyword(a[i], "BLOCKS")) {
      if (have_blocks) return c.Error(srv::kErrRegisterBlocksTwice);
      if (i + 3 >= a.size()) return c.Error(srv::kErrBlocksArgs);
      int64_t bs;
      if (!ArgInRange(c, a[i + 1], 1, store::kMaxBlockSize, srv::kErrBlocksBlockSizeRange, &bs))
        return redis::kOk;
      if (!ParseHashes(c, a[i + 2], a[i + 3], srv::kErrBlocksHashCountRange,
                       srv::kErrBlocksHashBlobLength, &table->hashes))
        return redis::kOk;
      table->block_size = static_cast<uint32_t>(bs);
      table->Finish();
      have_blocks = true;
      i += 4;
    } else if (IsKeyword(a[i], "PREFILL_MS")) {
      if (ra.has_prefill) return c.Error(srv::kErrRegisterPrefillTwice);
      if (i + 1 >= a.size()) return c.Error(srv::kErrPrefillNeedsValue);
      int64_t ms;
      if (!ArgInRange(c, a[i + 1], 0, kMaxPrefillMs, srv::kErrPrefillRange, &ms)) return redis::kOk;
      ra.has_prefill = true;
      ra.prefill_us = static_cast<uint64_t>(ms) * 1000;
      i += 2;
    } else {
      return c.Error(srv::RegisterOptionError(a[i]));
    }
  }
  if (have_blocks) ra.blocks = std::move(table);
  if (!CheckSameSlot(c, a[1])) return redis::kOk;
  Key key(ctx, argv[1], redis::kRead | redis::kWrite);
  bool wrong = false;
  NsValue* v = key.value(&wrong);
  if (wrong) return c.Error(srv::kErrWrongType);
  uint64_t lsn = 0;
  if (v == nullptr) {
    std::unique_ptr<NsValue, void (*)(NsValue*)> fresh(NewNsValue(), DeleteNsValue);
    pion::Status st = fresh->store->Register(ra, &lsn);
    if (!st.ok()) return c.Status(st);
    Reaccount(fresh.get());
    if (api.ModuleTypeSetValue(key.get(), NsType(), fresh.get()) != redis::kOk)
      return c.Error("ERR could not set the key");
    fresh.release();
  } else {
    pion::Status st = v->store->Register(ra, &lsn);
    if (!st.ok()) return c.Status(st);
    Reaccount(v);
  }
  api.ReplicateVerbatim(ctx);
  return c.Simple("OK");
}

int KvLookup(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -2)) return redis::kOk;
  auto& a = c.a;
  bool has_tokens = false, has_prefill = false;
  int64_t tokens = 0, prefill_ms = 0;
  for (size_t i = 2; i < a.size(); i += 2) {
    bool is_tokens = IsKeyword(a[i], "TOKENS");
    if (!is_tokens && !IsKeyword(a[i], "PREFILL_MS")) return c.Error(srv::kErrLookupUnknownOption);
    if (i + 1 >= a.size()) return c.Error(srv::kErrLookupOptionNeedsValue);
    if (is_tokens) {
      if (!ArgInRange(c, a[i + 1], 0, kMaxLookupTokens, srv::kErrTokensRange, &tokens))
        return redis::kOk;
      has_tokens = true;
    } else {
      if (!ArgInRange(c, a[i + 1], 0, kMaxPrefillMs, srv::kErrPrefillRange, &prefill_ms))
        return redis::kOk;
      has_prefill = true;
    }
  }
  Key key(ctx, argv[1], redis::kRead);
  bool wrong = false;
  NsValue* v = key.value(&wrong);
  if (wrong) return c.Error(srv::kErrWrongType);
  store::LookupResult lr;
  if (v != nullptr) lr = v->store->Lookup(kInternalNs);
  if (!lr.hit) {
    g_receipt.RecordMiss();
    return c.Simple("MISS");
  }
  uint64_t credit_tokens = lr.layer0_tokens;
  uint64_t credit_us = lr.prefill_us;
  if (has_tokens) {
    credit_tokens = static_cast<uint64_t>(tokens);
    credit_us = has_prefill ? static_cast<uint64_t>(prefill_ms) * 1000 : 0;
  } else if (has_prefill) {
    credit_us = static_cast<uint64_t>(prefill_ms) * 1000;
  }
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
  auto t = v != nullptr ? v->store->Blocks(kInternalNs) : nullptr;
  if (!t) c.Simple("UNKNOWN");
  return t;
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
  if (!ParseHashes(c, c.a[2], c.a[3], srv::kErrHashCountRange, srv::kErrHashBlobLength, &probes))
    return redis::kOk;
  auto table = TableOf(c);
  if (!table) return redis::kOk;
  std::string out((probes.size() + 7) / 8, '\0');
  for (size_t i = 0; i < probes.size(); ++i)
    if (table->Contains(probes[i])) out[i >> 3] |= static_cast<char>(1u << (i & 7));
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
  store::NamespaceInfo info;
  if (v == nullptr || !v->store->Describe(kInternalNs, &info)) return c.Simple("UNKNOWN");
  std::string out;
  InfoField(&out, "namespace", c.a[1]);
  InfoField(&out, "parent", "");
  InfoField(&out, "children", uint64_t{0});
  InfoField(&out, "depth", uint64_t{0});
  InfoField(&out, "chain_length", uint64_t{1});
  InfoField(&out, "tokens", info.tokens);
  InfoField(&out, "chain_tokens", info.tokens);
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
  InfoField(&out, "registered_prefixes", ns);
  InfoField(&out, "total_prefix_tokens", t.prefix_tokens.load(kR));
  InfoField(&out, "vstore_sessions", 2 * ns);
  InfoField(&out, "vstore_max_sessions", 0);  // unbounded: Redis's maxmemory bounds the node
  InfoField(&out, "vstore_total_fetches", t.fetches.load(kR));
  // Evictions are Redis's (maxmemory-policy): INFO stats evicted_keys counts them.
  InfoField(&out, "vstore_evictions", 0);
  InfoField(&out, "vstore_bytes", t.bytes.load(kR));
  InfoField(&out, "maxmemory", 0);  // Redis's own (CONFIG GET maxmemory)
  // Persistence is Redis's (RDB/AOF): pion's WAL is not used in the module.
  InfoField(&out, "wal_enabled", 0);
  InfoField(&out, "wal_bytes", 0);
  InfoField(&out, "wal_appended", 0);
  InfoField(&out, "wal_replayed", 0);
  InfoField(&out, "last_save_unix", 0);
  InfoField(&out, "module", "pion.so");
  return c.Bulk(out.data(), out.size());
}

// --- V.* ---------------------------------------------------------------------------

// The namespace a session id names, opened for `mode`; nullptr when the
// command was answered (unknown session, CROSSSLOT, wrong type).
struct Session {
  std::unique_ptr<OwnedString> ns_name;
  std::unique_ptr<Key> key;
  NsValue* v = nullptr;
  std::string_view internal_sid;  // "ns_pk" / "ns_pv"
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
  s->internal_sid = side == Side::kKeys ? kInternalK : kInternalV;
  return true;
}

bool ParseLayer(Call& c, std::string_view arg, uint32_t* layer) {
  int64_t v;
  if (!ArgInRange(c, arg, 0, kMaxLayer, srv::kErrLayerRange, &v)) return false;
  *layer = static_cast<uint32_t>(v);
  return true;
}

int VStoreBatch(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -6)) return redis::kOk;
  auto& a = c.a;
  uint32_t layer;
  if (!ParseLayer(c, a[2], &layer)) return redis::kOk;
  int64_t start, count;
  if (!ArgInRange(c, a[3], 0, kMaxTokens, srv::kErrStoreStartRange, &start)) return redis::kOk;
  if (!ArgInRange(c, a[4], 1, kMaxTokens, srv::kErrStoreCountRange, &count)) return redis::kOk;
  if (start + count > kMaxTokens) return c.Error(srv::kErrStoreEndRange);
  store::RowInput in;
  in.type = store::RowInput::Type::kF32;
  if (a.size() > 6) {
    if (a.size() != 8 || !IsKeyword(a[6], "FMT") ||
        !(IsKeyword(a[7], "F32") || IsKeyword(a[7], "F16")))
      return c.Error(srv::kErrStoreBatchOption);
    if (IsKeyword(a[7], "F16")) in.type = store::RowInput::Type::kF16;
  }
  in.data = a[5].data();
  in.bytes = a[5].size();
  Session s;
  if (!OpenSession(c, a[1], redis::kRead | redis::kWrite, &s)) return redis::kOk;
  uint64_t lsn = 0;
  pion::Status st = s.v->store->StoreRows(s.internal_sid, layer, static_cast<uint64_t>(start),
                                          static_cast<uint64_t>(count), in, &lsn);
  if (!st.ok()) {
    if (st.id() == ErrorId::kSizeMismatch) return c.Error(srv::StoreBatchError(st.message()));
    return c.Status(st);
  }
  Reaccount(s.v);
  api.ReplicateVerbatim(ctx);
  return c.Simple("OK");
}

uint64_t ElemBytes(const FetchPlan& p, OutFmt fmt) {
  bool raw = p.fmt == quant::Format::kFp16 && fmt != OutFmt::kF32;
  return raw || fmt == OutFmt::kF16 ? 2 : 4;
}
uint64_t BodyBytes(const FetchPlan& p, OutFmt fmt) { return p.rows * p.dim * ElemBytes(p, fmt); }

// One layer's rows as a bulk string (a null when no requested row is stored).
// Returns the payload bytes sent, or -1 after an error reply.
int64_t ReplyPlan(Call& c, const FetchPlan& plan, OutFmt fmt) {
  if (plan.stored_rows == 0) {
    api.ReplyWithNull(c.ctx);
    return 0;
  }
  const uint64_t len = BodyBytes(plan, fmt);
  std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[len == 0 ? 1 : len]);
  if (!buf) {
    c.Error(srv::kErrNoMemory);
    return -1;
  }
  const bool raw = plan.fmt == quant::Format::kFp16 && fmt != OutFmt::kF32;
  const size_t elem = ElemBytes(plan, fmt);
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
  for (const FetchPlan& p : plans) body += BodyBytes(p, fmt);
  if (body > kMaxReplyBytes) {
    c.Error(srv::kErrFetchReplyTooBig);
    return false;
  }
  return true;
}

bool ParseOutFmt(Call& c, std::string_view v, OutFmt* out) {
  if (IsKeyword(v, "F32")) {
    *out = OutFmt::kF32;
  } else if (IsKeyword(v, "F16")) {
    *out = OutFmt::kF16;
  } else if (IsKeyword(v, "NATIVE")) {
    *out = OutFmt::kNative;
  } else {
    c.Error(srv::FetchFormatError(v));
    return false;
  }
  return true;
}

int VFetchRange(Call& c, std::span<const std::string_view> a, OutFmt fmt) {
  if (a.size() != 6) return c.Error(srv::kErrFetchRangeArgs);
  uint32_t layer;
  if (!ParseLayer(c, a[2], &layer)) return redis::kOk;
  int64_t start, end;
  if (!ArgInRange(c, a[4], 0, kMaxTokens, srv::kErrFetchRangeOrder, &start) ||
      !ArgInRange(c, a[5], 0, kMaxTokens, srv::kErrFetchRangeOrder, &end))
    return redis::kOk;
  if (end <= start) return c.Error(srv::kErrFetchRangeOrder);
  Session s;
  if (!OpenSession(c, a[1], redis::kRead, &s)) return redis::kOk;
  auto plan = s.v->store->FetchRange(s.internal_sid, layer, static_cast<uint64_t>(start),
                                     static_cast<uint64_t>(end));
  if (!plan.ok()) return c.Status(plan.status());
  Totals().fetches.fetch_add(static_cast<uint64_t>(end - start), std::memory_order_relaxed);
  std::vector<FetchPlan> plans;
  plans.push_back(std::move(*plan));
  if (!CheckReplySize(c, plans, fmt)) return redis::kOk;
  int64_t n = ReplyPlan(c, plans[0], fmt);
  if (n > 0) g_receipt.RecordBytesServed(static_cast<uint64_t>(n));
  return redis::kOk;
}

int VFetchBatch(Call& c, std::span<const std::string_view> a, OutFmt fmt) {
  if (a.size() != 5 && a.size() != 6) return c.Error(srv::kErrFetchBatchArgs);
  int64_t start, end, layers = 0;
  if (!ArgInRange(c, a[3], 0, kMaxTokens, srv::kErrFetchBatchOrder, &start) ||
      !ArgInRange(c, a[4], 0, kMaxTokens, srv::kErrFetchBatchOrder, &end))
    return redis::kOk;
  if (end <= start) return c.Error(srv::kErrFetchBatchOrder);
  if (a.size() == 6 && !ArgInRange(c, a[5], 1, store::kMaxLayers, srv::kErrNumLayersRange, &layers))
    return redis::kOk;
  Session s;
  if (!OpenSession(c, a[1], redis::kRead, &s)) return redis::kOk;
  auto plans = s.v->store->FetchBatch(s.internal_sid, static_cast<uint64_t>(start),
                                      static_cast<uint64_t>(end), static_cast<uint32_t>(layers));
  if (!plans.ok()) {
    if (plans.status().id() == ErrorId::kNothingStored) return c.Error(srv::kErrFetchBatchNoLayers);
    return c.Status(plans.status());
  }
  Totals().fetches.fetch_add(static_cast<uint64_t>(end - start) * plans->size(),
                             std::memory_order_relaxed);
  if (!CheckReplySize(c, *plans, fmt)) return redis::kOk;
  api.ReplyWithArray(c.ctx, static_cast<long>(plans->size()));
  uint64_t served = 0;
  for (const FetchPlan& p : *plans) {
    int64_t n = ReplyPlan(c, p, fmt);
    if (n > 0) served += static_cast<uint64_t>(n);
  }
  g_receipt.RecordBytesServed(served);
  return redis::kOk;
}

int VFetchIds(Call& c, std::span<const std::string_view> a, OutFmt fmt) {
  if (fmt == OutFmt::kNative) return c.Error(srv::kErrNativeNeedsRange);
  uint32_t layer;
  if (!ParseLayer(c, a[2], &layer)) return redis::kOk;
  if (a.size() < 4) return c.Error(srv::kErrNoTokenIds);
  if (a.size() - 3 > kMaxIds) return c.Error(srv::kErrTooManyTokenIds);
  std::vector<uint64_t> ids(a.size() - 3);
  for (size_t i = 3; i < a.size(); ++i) {
    int64_t v;
    if (!ArgInRange(c, a[i], 0, kMaxTokens - 1, srv::kErrTokenIdRange, &v)) return redis::kOk;
    ids[i - 3] = static_cast<uint64_t>(v);
  }
  Session s;
  if (!OpenSession(c, a[1], redis::kRead, &s)) return redis::kOk;
  auto plan = s.v->store->FetchIds(s.internal_sid, layer, ids);
  if (!plan.ok()) return c.Status(plan.status());
  Totals().fetches.fetch_add(ids.size(), std::memory_order_relaxed);
  std::vector<FetchPlan> plans;
  plans.push_back(std::move(*plan));
  if (!CheckReplySize(c, plans, fmt)) return redis::kOk;
  int64_t n = ReplyPlan(c, plans[0], fmt);
  if (n > 0) g_receipt.RecordBytesServed(static_cast<uint64_t>(n));
  return redis::kOk;
}

int VFetch(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -4)) return redis::kOk;
  std::span<const std::string_view> a = c.a;
  OutFmt fmt = OutFmt::kF32;
  if (a.size() >= 2 && IsKeyword(a[a.size() - 2], "FMT")) {
    if (!ParseOutFmt(c, a.back(), &fmt)) return redis::kOk;
    a = a.first(a.size() - 2);
  }
  if (a.size() < 3) return c.Error(srv::kErrFetchArgs);
  if (IsKeyword(a[2], "BATCH")) return VFetchBatch(c, a, fmt);
  if (a.size() >= 4 && IsKeyword(a[3], "RANGE")) return VFetchRange(c, a, fmt);
  return VFetchIds(c, a, fmt);
}

int VInfo(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  Call c(ctx, argv, argc);
  if (!CheckArity(c, -1)) return redis::kOk;
  std::string out;
  auto line = [&](std::string_view k, std::string_view v) { InfoField(&out, k, v); };
  if (c.a.size() == 1) {
    ModuleTotals& t = Totals();
    constexpr auto kR = std::memory_order_relaxed;
    line("enabled", "1");
    line("sessions", std::to_string(2 * t.namespaces.load(kR)));
    line("total_tokens", std::to_string(t.total_tokens.load(kR)));
    line("total_fetches", std::to_string(t.fetches.load(kR)));
    line("bytes", std::to_string(t.bytes.load(kR)));
    return c.Bulk(out.data(), out.size());
  }
  Session s;
  if (!OpenSession(c, c.a[1], redis::kRead, &s)) return redis::kOk;
  auto info = s.v->store->Info(s.internal_sid);
  if (!info.ok()) return c.Status(info.status());
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
    api.ReplyWithMap(ctx, 16);
  else
    api.ReplyWithArray(ctx, 32);
  auto key = [&](const char* k) { api.ReplyWithStringBuffer(ctx, k, std::strlen(k)); };
  auto num = [&](const char* k, uint64_t v) {
    key(k);
    api.ReplyWithLongLong(ctx, static_cast<long long>(v));
  };
  auto text = [&](const char* k, const std::string& v) {
    key(k);
    api.ReplyWithStringBuffer(ctx, v.data(), v.size());
  };
  num("worker_id", 0);
  num("uptime_in_seconds", uptime);
  num("kvprefix_hits", s.hits);
  num("kvprefix_misses", s.misses);
  num("kvprefix_hits_measured", s.hits_measured);
  num("kvprefix_tokens_served", s.tokens_served);
  num("kvprefix_bytes_served", s.bytes_served);
  num("kvprefix_prefill_us_saved", s.prefill_us_saved);
  num("kvprefix_prefill_us_measured", s.prefill_us_measured);
  text("prefill_seconds_avoided", srv::Receipt::SecondsText(s.prefill_us_saved));
  text("prefill_seconds_avoided_measured", srv::Receipt::SecondsText(s.prefill_us_measured));
  num("semantic_hits", s.semantic_hits);
  num("semantic_misses", s.semantic_misses);
  num("moe_hits", s.moe_hits);
  num("moe_misses", s.moe_misses);
  num("vector_queries", s.vector_queries);
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
  auto info = v->store->Info(kInternalK);
  if (!info.ok()) return c.Status(info.status());
  const size_t rb = quant::RowBytes(info->fmt, info->dim);
  const std::string_view blob = a[5];
  if (blob.empty() || blob.size() % rb != 0) return c.Error(srv::kErrLoadRowsBlob);
  const uint64_t count = blob.size() / rb;
  if (static_cast<uint64_t>(start) + count > store::kMaxTokens)
    return c.Error(srv::kErrStoreEndRange);
  pion::Status st =
      v->store->ApplyStored(kInternalNs, 1, side, layer, static_cast<uint64_t>(start), count,
                            {reinterpret_cast<const uint8_t*>(blob.data()), blob.size()});
  if (!st.ok()) return c.Status(st);
  Reaccount(v);
  api.ReplicateVerbatim(ctx);
  return c.Simple("OK");
}

struct CommandRow {
  const char* name;
  redis::CmdFunc fn;
  const char* flags;
  int first, last, step;
};

}  // namespace

bool RegisterCommands(RedisModuleCtx* ctx) {
  g_start_us = MonotonicUs();
  const CommandRow rows[] = {
      {"KV.PREFIX.REGISTER", KvRegister, "write deny-oom", 1, 1, 1},
      {"KV.PREFIX.LOOKUP", KvLookup, "readonly fast", 1, 1, 1},
      {"KV.PREFIX.DROP", KvDrop, "write", 1, -1, 1},
      {"KV.PREFIX.BLOCKS", KvBlocks, "readonly fast", 1, 1, 1},
      {"KV.PREFIX.MEMBERSHIP", KvMembership, "readonly fast", 1, 1, 1},
      {"KV.PREFIX.INFO", KvInfo, "readonly fast", 0, 0, 0},
      {"V.STOREBATCH", VStoreBatch, "write deny-oom", 1, 1, 1},
      {"V.FETCH", VFetch, "readonly", 1, 1, 1},
      {"V.INFO", VInfo, "readonly fast", 1, 1, 1},
      {"PION.STATS", PionStats, "readonly fast", 0, 0, 0},
      {"PION.LOADROWS", PionLoadRows, "write deny-oom", 1, 1, 1},
  };
  for (const CommandRow& r : rows)
    if (api.CreateCommand(ctx, r.name, r.fn, r.flags, r.first, r.last, r.step) != redis::kOk)
      return false;
  return true;
}

}  // namespace pion::module
