// The KV.BLOCK.* family (docs/protocol.md "Blocks"): engine blocks as string
// keys. KV.BLOCK.MATCH finds how much of a chain of block keys is stored (a
// leading-run count or a bitmap) in one round trip and may pin what it found;
// KV.BLOCK.UNPIN ends such pins; KV.BLOCK.CHAIN writes blocks as one linked,
// atomic chain. The store does the work (store/pins.cc, store/block_links.cc).
//
// ACL: the keys are checked at admission (kAclKeyNumkeys: MATCH's keys are the
// numkeys arguments after numkeys; CHAIN's every other argument from the first
// key on, found by its own grammar), so a denial answers -NOPERM before any
// key is looked at and says nothing of what exists.
#include <climits>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/block_format.h"
#include "server/commands/command_table.h"
#include "store/block_ops.h"
#include "store/key_ops.h"
#include "store/store.h"

namespace pion::server {

namespace {

constexpr int64_t kMaxMatchKeys = 1048576;
constexpr int64_t kMaxPinMs = 600000;
constexpr int64_t kMaxTokens = 65536;

// KV.BLOCK.MATCH numkeys key [key ...] [BITMAP] [PIN ms]
void Match(CommandContext& ctx) {
  auto nk = ParseInt64Strict(ctx.args[1]);
  if (!nk || *nk <= 0) {
    ctx.reply->Error(kErrNumkeysPositive);
    return;
  }
  if (*nk > kMaxMatchKeys) {
    ctx.reply->Error(kErrNumkeysRange);
    return;
  }
  const size_t n = static_cast<size_t>(*nk);
  if (n > ctx.args.size() - 2) {
    ctx.reply->Error(kErrNumkeysArgs);
    return;
  }
  bool bitmap = false, pin = false;
  std::string_view pin_arg;
  for (size_t i = 2 + n; i < ctx.args.size(); ++i) {
    if (IsKeyword(ctx.args[i], "BITMAP") && !bitmap) {
      bitmap = true;
    } else if (IsKeyword(ctx.args[i], "PIN") && !pin && i + 1 < ctx.args.size()) {
      pin = true;
      pin_arg = ctx.args[++i];
    } else {
      ctx.reply->Error(kErrSyntaxError);
      return;
    }
  }
  int64_t pin_ms = 0;
  if (pin) {
    auto ms = ParseInt64Strict(pin_arg);
    if (!ms || *ms < 1 || *ms > kMaxPinMs) {
      ctx.reply->Error(kErrPinRange);
      return;
    }
    pin_ms = *ms;
  }
  std::string bits;  // the reply's bytes: the one allocation besides the lease's
  if (bitmap) bits.assign((n + 7) / 8, '\0');
  std::string user;
  if (pin) user = ctx.env->control().ClientUserName(ctx.client);
  store::BlockMatchResult r =
      store::OpBlockMatch({*ctx.env->store()}, ctx.args.subspan(2, n),
                          bitmap ? reinterpret_cast<uint8_t*>(bits.data()) : nullptr, pin_ms, user);
  if (r.too_many_leases) {
    ctx.reply->Error(kErrTooManyLeases);
    return;
  }
  if (pin) ctx.reply->ArrayHeader(2);
  if (bitmap)
    ctx.reply->Bulk(bits);
  else
    ctx.reply->Integer(static_cast<int64_t>(r.count));
  if (pin) ctx.reply->Integer(static_cast<int64_t>(r.lease));
}

// KV.BLOCK.UNPIN lease [lease ...]: never an error for a lease that is not
// live (or not this user's); a lease id that is no integer counts 0 too.
void Unpin(CommandContext& ctx) {
  std::vector<uint64_t> ids;
  ids.reserve(ctx.args.size() - 1);
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    auto v = ParseInt64Strict(ctx.args[i]);
    if (v && *v > 0) ids.push_back(static_cast<uint64_t>(*v));
  }
  const uint64_t n =
      store::OpBlockUnpin({*ctx.env->store()}, ids, ctx.env->control().ClientUserName(ctx.client));
  ctx.reply->Integer(static_cast<int64_t>(n));
}

// Where CHAIN's keyword options end (the first key's index), or 0 after
// replying with the error. Shared by the handler and the ACL key finder.
struct ChainOptions {
  store::Store::ChainArgs a;
  size_t first = 1;
};

bool ParseChain(CommandContext* ctx, std::span<const std::string_view> args, ChainOptions* o) {
  auto fail = [&](std::string_view e) {
    if (ctx != nullptr) ctx->reply->Error(e);
    return false;
  };
  bool after = false, ex = false, px = false, hashes = false, tokens = false;
  bool format = false, dtype = false, row = false;
  std::string_view row_arg;
  size_t i = 1;
  int64_t expire_ms = 0;
  for (; i + 1 < args.size(); i += 2) {
    std::string_view kw = args[i], v = args[i + 1];
    if (IsKeyword(kw, "AFTER")) {
      if (after) return fail(kErrSyntaxError);
      after = true;
      o->a.has_after = true;
      o->a.after = v;
    } else if (IsKeyword(kw, "EX") || IsKeyword(kw, "PX")) {
      const bool is_ex = IsKeyword(kw, "EX");
      if (ex || px) return fail(kErrSyntaxError);
      (is_ex ? ex : px) = true;
      auto t = ParseInt64Strict(v);
      if (!t) return fail(kErrNotInteger);
      const int64_t unit = is_ex ? 1000 : 1;
      if (*t <= 0 || *t > (LLONG_MAX - UnixMillis()) / unit)
        return fail(ctx != nullptr ? InvalidExpireError("kv.block.chain") : std::string());
      expire_ms = *t * unit;
    } else if (IsKeyword(kw, "HASHES")) {
      if (hashes) return fail(kErrSyntaxError);
      hashes = true;
      o->a.hashes = v;
      if (v.empty()) return fail(kErrChainHashes);
    } else if (IsKeyword(kw, "TOKENS")) {
      if (tokens) return fail(kErrSyntaxError);
      tokens = true;
      auto t = ParseInt64Strict(v);
      if (!t || *t < 1 || *t > kMaxTokens) return fail(kErrChainTokens);
      o->a.tokens = static_cast<uint32_t>(*t);
    } else if (IsKeyword(kw, "FORMAT")) {
      if (format) return fail(kErrSyntaxError);
      format = true;
      auto f = quant::ParseFormat(v);
      if (!f) return fail(kErrChainFormat);
      o->a.quant.format = *f;
    } else if (IsKeyword(kw, "DTYPE")) {
      if (dtype) return fail(kErrSyntaxError);
      dtype = true;
      auto d = ParseBlockDtype(v);
      if (!d) return fail(kErrChainDtype);
      o->a.quant.dtype = *d;
    } else if (IsKeyword(kw, "ROW")) {
      if (row) return fail(kErrSyntaxError);
      row = true;
      row_arg = v;
    } else {
      break;
    }
  }
  if (format && (!dtype || !row)) return fail(kErrChainFormatNeeds);
  if (!format && (dtype || row)) return fail(kErrChainFormatAlone);
  if (format) {
    auto n = ParseInt64Strict(row_arg);
    std::string e = CheckBlockRow(o->a.quant.format, n ? *n : 0);
    if (!e.empty()) return fail(e);
    o->a.quant.row = static_cast<uint32_t>(*n);
  }
  o->first = i;
  const size_t rest = args.size() - i;
  if (rest == 0 || rest % 2 != 0)
    return fail(ctx != nullptr ? WrongArity("kv.block.chain") : std::string());
  if (hashes && o->a.hashes.size() != rest / 2 * 8) return fail(kErrChainHashes);
  if (expire_ms > 0) o->a.expire_at_ms = UnixMillis() + expire_ms;
  return true;
}

// KV.BLOCK.CHAIN [AFTER parent] [EX s | PX ms] [HASHES blob] [TOKENS n]
//                [FORMAT f DTYPE d ROW n] key value [...]
void Chain(CommandContext& ctx) {
  ChainOptions o;
  if (!ParseChain(&ctx, ctx.args, &o)) return;
  std::span<const std::string_view> kv = ctx.args.subspan(o.first);
  std::vector<store::StrRef> made;
  if (o.a.quant.row != 0) {  // FORMAT: every value quantized here, before anything is stored
    made.resize(kv.size() / 2);
    std::string err;
    for (size_t i = 1; i < kv.size(); i += 2) {
      made[i / 2] = QuantizeBlockValue(kv[i], o.a.quant, i / 2, &err);
      if (!made[i / 2]) return ctx.reply->Error(err);
    }
  }
  // Big values are adopted (no copy), as MSET does.
  for (size_t i = 1; i < kv.size() && o.a.quant.row == 0; i += 2) {
    if (kv[i].size() < kBigArgBytes) continue;
    OwnedBuffer b = ctx.TakeArg(kv[i]);
    if (b.empty()) continue;
    store::StrRef v = store::StrValue::Adopt(std::move(b), kv[i].size());
    ctx.pins.push_back(v);
    made.resize(kv.size() / 2);
    made[i / 2] = std::move(v);
  }
  // Keyspace notifications: per key `new` (class n) when it did not exist,
  // looked up only when someone could hear it, and `kvblock.chain` (class d).
  std::vector<bool> absent;
  if (ctx.env->NotifyWanted(kNotifyNew)) {
    absent.resize(kv.size() / 2);
    for (size_t i = 0; i < absent.size(); ++i)
      absent[i] = store::OpType({*ctx.env->store()}, kv[2 * i]) == store::KeyType::kNone;
  }
  uint64_t lsn = 0;
  Status st = store::OpBlockChain({*ctx.env->store(), &lsn}, kv, o.a, made);
  ctx.wait_lsn = lsn;
  if (!st.ok()) {
    ctx.reply->Error(StatusToError(st));
    return;
  }
  std::unordered_set<std::string_view> told;  // a key named twice is new once
  for (size_t i = 0; i < kv.size(); i += 2) {
    if (!absent.empty() && absent[i / 2] && told.insert(kv[i]).second)
      ctx.env->NotifyKeyspaceEvent(kNotifyNew, "new", kv[i]);
    ctx.env->NotifyKeyspaceEvent(kNotifyModule, "kvblock.chain", kv[i]);
  }
  ctx.reply->SimpleString("OK");
}

// KV.BLOCK.INFO key (ours): a block's links and metadata, no LRU touch; a
// flat array of field/value pairs, or nil when the key is no live string key.
void Info(CommandContext& ctx) {
  store::Store::BlockInfo b;
  if (!store::OpDescribeBlock({*ctx.env->store()}, ctx.args[1], &b)) {
    ctx.reply->Null();
    return;
  }
  ctx.reply->ArrayHeader(8);
  ctx.reply->Bulk("parent");
  if (!b.has_parent)
    ctx.reply->Null();
  else
    ctx.reply->Bulk(b.parent);
  ctx.reply->Bulk("children");
  ctx.reply->Integer(static_cast<int64_t>(b.children));
  ctx.reply->Bulk("hash");
  if (b.has_hash)
    ctx.reply->Bulk(std::to_string(b.hash));  // a u64: decimal text, as it may not fit an integer
  else
    ctx.reply->Null();
  ctx.reply->Bulk("tokens");
  ctx.reply->Integer(b.tokens);
}

}  // namespace

// The ACL key positions of a KV.BLOCK.CHAIN (every other argument from its
// first key; none when the options do not parse: the handler refuses it).
size_t ChainFirstKey(std::span<const std::string_view> args) {
  ChainOptions o;
  return ParseChain(nullptr, args, &o) ? o.first : 0;
}

void AddKvBlockCommands(std::vector<CommandSpec>* out) {
  const PionHandler handlers[] = {{"KV.BLOCK.MATCH", Match},
                                  {"KV.BLOCK.UNPIN", Unpin},
                                  {"KV.BLOCK.INFO", Info},
                                  {"KV.BLOCK.CHAIN", Chain}};
  AddPionCommands(handlers, out);
}

}  // namespace pion::server
