// String commands (docs/protocol.md "Keys"): GET, SET and its variants,
// MGET/MSET, APPEND, STRLEN, GETRANGE/SUBSTR (the generic key commands are
// commands/keys.cc, MEMORY commands/memory.cc). The values live in the store (store/strings.h); GET
// of a large value sends the stored buffer by reference (writev, no copy).
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "net/client_control.h"
#include "server/acl.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/block_format.h"
#include "server/commands/command_table.h"
#include "server/commands/key_events.h"
#include "server/commands/strings_tier.h"
#include "server/kv_events.h"
#include "store/key_ops.h"
#include "store/store.h"
#include "store/string_ops.h"

namespace pion::server {

namespace {

// A quantized block (KV.BLOCK.CHAIN ... FORMAT) is answered dequantized.
void ReplyValue(CommandContext& ctx, const store::StrRef& v) { ReplyStrValue(*ctx.reply, v); }

// A big argument's value adopted without a copy: the buffer it was received
// into becomes the value's memory (pinned in ctx until the dispatch is over:
// ctx.args still point into it). Null when the argument has no such buffer.
store::StrRef AdoptArg(CommandContext& ctx, std::string_view arg) {
  OwnedBuffer b = ctx.TakeArg(arg);
  if (b.empty()) return nullptr;
  store::StrRef v = store::StrValue::Adopt(std::move(b), arg.size());
  ctx.pins.push_back(v);
  return v;
}

// A value built from an argument: adopted (a big argument), else copied once
// into its own aligned buffer.
store::StrRef ValueOf(CommandContext& ctx, std::string_view arg) {
  if (store::StrRef v = AdoptArg(ctx, arg)) return v;
  auto v = store::StrValue::Copy(arg);
  if (!v) ctx.reply->Error(kErrNoMemory);
  return v;
}

// An expire argument's time as an absolute unix time in ms. unit_ms: 1000 for
// seconds, 1; absolute: EXAT/PXAT.
enum class ExpireErr { kNone, kNotInteger, kInvalid };
ExpireErr ParseExpire(std::string_view arg, int64_t unit_ms, bool absolute, int64_t* at_ms) {
  auto v = ParseInt64Strict(arg);
  if (!v) return ExpireErr::kNotInteger;
  if (*v <= 0 || *v > LLONG_MAX / unit_ms) return ExpireErr::kInvalid;
  int64_t ms = *v * unit_ms;
  if (!absolute) {
    if (ms > LLONG_MAX - UnixMillis()) return ExpireErr::kInvalid;
    ms += UnixMillis();
  }
  *at_ms = ms;
  return ExpireErr::kNone;
}

void ReplyExpireErr(CommandContext& ctx, ExpireErr e, std::string_view cmd) {
  if (e == ExpireErr::kNotInteger)
    ctx.reply->Error(kErrNotInteger);
  else
    ctx.reply->Error(InvalidExpireError(cmd));
}

// ParseExpire, replying its error (false) to the client.
bool ExpireArg(CommandContext& ctx, std::string_view arg, int64_t unit_ms, bool absolute,
               std::string_view cmd, int64_t* at_ms) {
  ExpireErr e = ParseExpire(arg, unit_ms, absolute, at_ms);
  if (e == ExpireErr::kNone) return true;
  ReplyExpireErr(ctx, e, cmd);
  return false;
}

// SET's and GETEX's options, read as Redis 7.0 reads them: the syntax of all
// of them first, the expire number only afterwards (by the caller). An option
// may repeat (the last expire given wins); two that conflict (NX and XX, EX
// and PX, KEEPTTL or PERSIST and an expire) are a syntax error, as are SET's
// options given to GETEX.
struct StringOptions {
  store::SetOptions::Cond cond = store::SetOptions::Cond::kAlways;
  bool get = false, keep_ttl = false, persist = false;
  enum Expire { kNoExpire, kEx, kPx, kExAt, kPxAt } expire = kNoExpire;
  std::string_view expire_arg;
  int64_t unit_ms() const { return expire == kEx || expire == kExAt ? 1000 : 1; }
  bool absolute() const { return expire == kExAt || expire == kPxAt; }
};

bool ParseStringOptions(CommandContext& ctx, size_t first, bool set, StringOptions* o) {
  using Cond = store::SetOptions::Cond;
  for (size_t i = first; i < ctx.args.size(); ++i) {
    std::string_view a = ctx.args[i];
    const bool more = i + 1 < ctx.args.size();
    // The expire kind `a` names, if any (kNoExpire: none).
    StringOptions::Expire kind = StringOptions::kNoExpire;
    if (IsKeyword(a, "EX"))
      kind = StringOptions::kEx;
    else if (IsKeyword(a, "PX"))
      kind = StringOptions::kPx;
    else if (IsKeyword(a, "EXAT"))
      kind = StringOptions::kExAt;
    else if (IsKeyword(a, "PXAT"))
      kind = StringOptions::kPxAt;
    if (set && IsKeyword(a, "NX") && o->cond != Cond::kXx) {
      o->cond = Cond::kNx;
    } else if (set && IsKeyword(a, "XX") && o->cond != Cond::kNx) {
      o->cond = Cond::kXx;
    } else if (set && IsKeyword(a, "GET")) {
      o->get = true;
    } else if (set && IsKeyword(a, "KEEPTTL") && o->expire == StringOptions::kNoExpire) {
      o->keep_ttl = true;
    } else if (!set && IsKeyword(a, "PERSIST") && o->expire == StringOptions::kNoExpire) {
      o->persist = true;
    } else if (kind != StringOptions::kNoExpire && more && !o->keep_ttl && !o->persist &&
               (o->expire == StringOptions::kNoExpire || o->expire == kind)) {
      o->expire = kind;
      o->expire_arg = ctx.args[++i];
    } else {
      ctx.reply->Error(kErrSyntaxError);
      return false;
    }
  }
  return true;
}

void Get(CommandContext& ctx) {
  // The reply is written in place (a small value copied under the shard lock,
  // a big one referenced): no reference count taken for a small GET. The
  // callback captures one pointer (std::function keeps it without allocating).
  struct Seen {
    CommandContext* ctx;
    bool can_defer;
    bool miss = false;
    store::StrRef on_disk;
  } seen{&ctx, ctx.CanDefer()};
  Status st = store::OpGetWith(
      {*ctx.env->store()}, ctx.args[1],
      [&seen](const store::StrRef& v) {
        seen.miss = v == nullptr;
        if (v != nullptr && v->on_disk())
          seen.on_disk = v;  // read below, outside the shard lock
        else
          ReplyValue(*seen.ctx, v);
      },
      /*tiered_as_is=*/seen.can_defer);
  if (!st.ok()) return (void)OkOrReply(ctx, st);
  if (seen.on_disk != nullptr) return ReplyFromTier(ctx, std::move(seen.on_disk));
  if (seen.miss) Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
}

// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts|KEEPTTL]
void Set(CommandContext& ctx) {
  StringOptions so;
  if (!ParseStringOptions(ctx, 3, /*set=*/true, &so)) return;
  store::SetOptions o;
  o.cond = so.cond;
  o.want_old = so.get;
  o.keep_ttl = so.keep_ttl;
  const bool have_expire = so.expire != StringOptions::kNoExpire;
  if (have_expire &&
      !ExpireArg(ctx, so.expire_arg, so.unit_ms(), so.absolute(), "set", &o.expire_at_ms))
    return;
  store::StrRef v = ValueOf(ctx, ctx.args[2]);
  if (!v) return;
  uint64_t lsn = 0;
  bool absent = KeyAbsent(ctx, ctx.args[1]);
  auto r = store::OpSet({*ctx.env->store(), &lsn}, ctx.args[1], std::move(v), o);
  ctx.wait_lsn = lsn;
  if (!r.ok()) return (void)OkOrReply(ctx, r.status());
  if (o.want_old && r->old == nullptr) Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
  if (r->done) {
    if (absent) Notify(ctx, kNotifyNew, "new", ctx.args[1]);
    Notify(ctx, kNotifyString, "set", ctx.args[1]);
    if (have_expire) Notify(ctx, kNotifyGeneric, "expire", ctx.args[1]);
  }
  if (o.want_old) return ReplyValue(ctx, r->old);
  if (r->done)
    ctx.reply->SimpleString("OK");
  else
    ctx.reply->Null();
}

void SetWithExpire(CommandContext& ctx, int64_t unit_ms, std::string_view cmd) {
  store::SetOptions o;
  if (!ExpireArg(ctx, ctx.args[2], unit_ms, false, cmd, &o.expire_at_ms)) return;
  store::StrRef v = ValueOf(ctx, ctx.args[3]);
  if (!v) return;
  uint64_t lsn = 0;
  bool absent = KeyAbsent(ctx, ctx.args[1]);
  auto r = store::OpSet({*ctx.env->store(), &lsn}, ctx.args[1], std::move(v), o);
  ctx.wait_lsn = lsn;
  if (!OkOrReply(ctx, r.status())) return;
  if (absent) Notify(ctx, kNotifyNew, "new", ctx.args[1]);
  Notify(ctx, kNotifyString, "set", ctx.args[1]);
  Notify(ctx, kNotifyGeneric, "expire", ctx.args[1]);
  ctx.reply->SimpleString("OK");
}

void SetEx(CommandContext& ctx) { SetWithExpire(ctx, 1000, "setex"); }
void PSetEx(CommandContext& ctx) { SetWithExpire(ctx, 1, "psetex"); }

void SetNx(CommandContext& ctx) {
  store::SetOptions o;
  o.cond = store::SetOptions::Cond::kNx;
  store::StrRef v = ValueOf(ctx, ctx.args[2]);
  if (!v) return;
  uint64_t lsn = 0;
  auto r = store::OpSet({*ctx.env->store(), &lsn}, ctx.args[1], std::move(v), o);
  ctx.wait_lsn = lsn;
  if (!OkOrReply(ctx, r.status())) return;
  if (r->done) {
    Notify(ctx, kNotifyNew, "new", ctx.args[1]);  // NX: the key did not exist
    Notify(ctx, kNotifyString, "set", ctx.args[1]);
  }
  ctx.reply->Integer(r->done ? 1 : 0);
}

void GetDel(CommandContext& ctx) {
  uint64_t lsn = 0;
  // A value on disk: the key goes now, its bytes are read without blocking the worker.
  const bool can_defer = ctx.CanDefer();
  auto r = store::OpGetDel({*ctx.env->store(), &lsn}, ctx.args[1], /*tiered_as_is=*/can_defer);
  ctx.wait_lsn = lsn;
  if (!OkOrReply(ctx, r.status())) return;
  Notify(ctx, *r ? kNotifyGeneric : kNotifyKeyMiss, *r ? "del" : "keymiss", ctx.args[1]);
  if (can_defer && *r != nullptr && (*r)->on_disk())
    return ReplyAfterTierRead(ctx, std::move(*r), ReplyStrValue);
  ReplyValue(ctx, *r);
}

// GETEX key [EX s|PX ms|EXAT ts|PXAT ts|PERSIST]
void GetEx(CommandContext& ctx) {
  StringOptions so;
  if (!ParseStringOptions(ctx, 2, /*set=*/false, &so)) return;
  const bool persist = so.persist;
  int64_t at = 0;
  if (so.expire != StringOptions::kNoExpire) {
    ExpireErr e = ParseExpire(so.expire_arg, so.unit_ms(), so.absolute(), &at);
    if (e != ExpireErr::kNone) {
      // As Redis 7.0: the key is looked up before the number is read, so a
      // missing key answers nil and a key of another type WRONGTYPE.
      uint64_t lsn = 0;
      auto r =
          store::OpGetEx({*ctx.env->store(), &lsn}, ctx.args[1], false, 0, /*tiered_as_is=*/true);
      if (!OkOrReply(ctx, r.status())) return;
      if (*r != nullptr) return ReplyExpireErr(ctx, e, "getex");
      Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
      return ReplyValue(ctx, nullptr);
    }
  }
  uint64_t lsn = 0;
  // PERSIST notifies only when it removed a TTL.
  bool had_ttl = persist && ctx.env->NotifyWanted(kNotifyGeneric) &&
                 store::OpExpireTimeMs({*ctx.env->store()}, ctx.args[1]) >= 0;
  const bool can_defer = ctx.CanDefer();  // a value on disk: read without blocking
  auto r = store::OpGetEx({*ctx.env->store(), &lsn}, ctx.args[1], persist, at, can_defer);
  ctx.wait_lsn = lsn;
  if (!OkOrReply(ctx, r.status())) return;
  if (*r == nullptr)
    Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
  else if (at > 0)
    Notify(ctx, kNotifyGeneric, at <= UnixMillis() ? "del" : "expire", ctx.args[1]);
  else if (had_ttl)
    Notify(ctx, kNotifyGeneric, "persist", ctx.args[1]);
  if (can_defer && *r != nullptr && (*r)->on_disk())
    return ReplyAfterTierRead(ctx, std::move(*r), ReplyStrValue);
  ReplyValue(ctx, *r);
}

// MGET with values in the disk tier: each is read (checked) on a tier I/O
// thread, all at once, while the worker serves others; the reply is completed
// on the worker when the last read is done, promoting as GET does. A value
// that cannot be read answers nil, as the synchronous path does (a damaged one
// is dropped as the tier drops entries).
struct MGetFromDisk {
  CommandEnv* env;
  std::shared_ptr<DeferredReply> done;
  std::vector<std::string> keys;  // of the values on disk
  std::vector<size_t> at;         // their positions in the reply
  std::vector<store::StrRef> vals;
  std::vector<store::StrRef> fresh;  // read back (null: failed)
  std::vector<Code> failed;
  std::atomic<size_t> left{0};
};

void CompleteMGet(const std::shared_ptr<MGetFromDisk>& m) {
  m->done->Complete([m](ReplyBuilder& rb) {
    store::Store* st = m->env->store();
    for (size_t j = 0; j < m->keys.size(); ++j) {
      store::StrRef& slot = m->vals[m->at[j]];
      if (m->fresh[j] != nullptr) {
        st->PromoteTiered(m->keys[j], slot, m->fresh[j]);
        slot = m->fresh[j];
      } else {
        if (m->failed[j] == Code::kCorruption) st->DropDamagedTiered(m->keys[j], slot);
        slot = nullptr;
      }
    }
    KvEvents::FlushThread();  // completed outside the read batch
    rb.ArrayHeader(m->vals.size());
    for (const auto& v : m->vals) ReplyStrValue(rb, v);
  });
}

void MGet(CommandContext& ctx) {
  const bool can_defer = ctx.CanDefer();
  auto vals = store::OpMGet({*ctx.env->store()}, ctx.args.subspan(1), /*tiered_as_is=*/can_defer);
  if (ctx.env->NotifyWanted(kNotifyKeyMiss))
    for (size_t i = 0; i < vals.size(); ++i)
      if (vals[i] == nullptr &&
          store::OpType({*ctx.env->store()}, ctx.args[i + 1]) != store::KeyType::kKvPrefix)
        Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[i + 1]);
  if (can_defer) {
    auto m = std::make_shared<MGetFromDisk>();
    for (size_t i = 0; i < vals.size(); ++i)
      if (vals[i] != nullptr && vals[i]->on_disk()) {
        m->keys.emplace_back(ctx.args[i + 1]);
        m->at.push_back(i);
      }
    if (!m->keys.empty()) {
      m->env = ctx.env;
      m->done = ctx.Defer();
      m->vals = std::move(vals);
      m->fresh.resize(m->keys.size());
      m->failed.resize(m->keys.size(), Code::kOk);
      m->left.store(m->keys.size(), std::memory_order_relaxed);
      for (size_t j = 0; j < m->keys.size(); ++j)
        m->env->store()->ReadTiered(m->keys[j], m->vals[m->at[j]], [m, j](Result<store::StrRef> r) {
          if (r.ok())
            m->fresh[j] = *r;
          else
            m->failed[j] = r.status().code();
          if (m->left.fetch_sub(1, std::memory_order_acq_rel) == 1) CompleteMGet(m);
        });
      return;
    }
  }
  ctx.reply->ArrayHeader(vals.size());
  for (const auto& v : vals) ReplyValue(ctx, v);
}

void MSetCommon(CommandContext& ctx, bool nx) {
  if ((ctx.args.size() - 1) % 2 != 0) {
    ctx.reply->Error(WrongArity(nx ? "msetnx" : "mset"));
    return;
  }
  // Big values are adopted; the rest are copied by the store.
  std::vector<store::StrRef> made;
  for (size_t i = 2; i < ctx.args.size(); i += 2) {
    if (ctx.args[i].size() < kBigArgBytes) continue;
    store::StrRef v = AdoptArg(ctx, ctx.args[i]);
    if (!v) continue;
    made.resize((ctx.args.size() - 1) / 2);
    made[(i - 2) / 2] = std::move(v);
  }
  uint64_t lsn = 0;
  std::vector<bool> absent;
  if (ctx.env->NotifyWanted(kNotifyNew))
    for (size_t i = 1; i < ctx.args.size(); i += 2) absent.push_back(KeyAbsent(ctx, ctx.args[i]));
  auto r = store::OpMSet({*ctx.env->store(), &lsn}, ctx.args.subspan(1), nx, made);
  ctx.wait_lsn = lsn;
  if (!OkOrReply(ctx, r.status())) return;
  if (*r) {
    for (size_t i = 1; i < ctx.args.size(); i += 2) {
      if (!absent.empty() && absent[(i - 1) / 2]) Notify(ctx, kNotifyNew, "new", ctx.args[i]);
      Notify(ctx, kNotifyString, "set", ctx.args[i]);
    }
  }
  if (nx)
    ctx.reply->Integer(*r ? 1 : 0);
  else
    ctx.reply->SimpleString("OK");
}

void MSet(CommandContext& ctx) { MSetCommon(ctx, false); }
void MSetNx(CommandContext& ctx) { MSetCommon(ctx, true); }

void Append(CommandContext& ctx) {
  uint64_t lsn = 0;
  bool absent = KeyAbsent(ctx, ctx.args[1]);
  auto r = store::OpAppend({*ctx.env->store(), &lsn}, ctx.args[1], ctx.args[2],
                           AdoptArg(ctx, ctx.args[2]), ctx.env->config().proto_max_bulk_len);
  ctx.wait_lsn = lsn;
  if (!OkOrReply(ctx, r.status())) return;
  if (absent) Notify(ctx, kNotifyNew, "new", ctx.args[1]);
  Notify(ctx, kNotifyString, "append", ctx.args[1]);
  ctx.reply->Integer(static_cast<int64_t>(*r));
}

void StrLen(CommandContext& ctx) {
  auto r = store::OpGet({*ctx.env->store()}, ctx.args[1]);
  if (!OkOrReply(ctx, r.status())) return;
  if (!*r) Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
  ctx.reply->Integer(*r ? static_cast<int64_t>((*r)->PlainSize()) : 0);
}

// GETRANGE's reply from the value (null: the key is missing).
void ReplyRange(ReplyBuilder& rb, const store::StrRef& v, int64_t start, int64_t end) {
  if (v == nullptr) return rb.Bulk("");
  if (v->quantized()) return rb.Error(kErrBlockQuantized);
  int64_t len = static_cast<int64_t>(v->size);
  if (start < 0 && end < 0 && start > end) return rb.Bulk("");
  if (start < 0) start += len;
  if (end < 0) end += len;
  if (start < 0) start = 0;
  if (end < 0) end = 0;
  if (end >= len) end = len - 1;
  if (len == 0 || start > end) return rb.Bulk("");
  rb.Bulk(v->view().substr(static_cast<size_t>(start), static_cast<size_t>(end - start + 1)));
}

void GetRange(CommandContext& ctx) {
  auto s = ParseInt64Strict(ctx.args[2]);
  auto e = ParseInt64Strict(ctx.args[3]);
  if (!s || !e) {
    ctx.reply->Error(kErrNotInteger);
    return;
  }
  const bool can_defer = ctx.CanDefer();  // a value on disk: read without blocking
  store::StrRef v;
  Status st = store::OpGetWith(
      {*ctx.env->store()}, ctx.args[1], [&v](const store::StrRef& got) { v = got; },
      /*tiered_as_is=*/can_defer);
  if (!OkOrReply(ctx, st)) return;
  if (!v) Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
  if (can_defer && v != nullptr && v->on_disk()) {
    const int64_t start = *s, end = *e;
    return ReplyAfterTierRead(ctx, std::move(v),
                              [start, end](ReplyBuilder& rb, const store::StrRef& got) {
                                ReplyRange(rb, got, start, end);
                              });
  }
  ReplyRange(*ctx.reply, v, *s, *e);
}

}  // namespace

void AddStringCommands(std::vector<CommandSpec>* out) {
  constexpr uint32_t kR = kCmdReadonly | kCmdKvcache;
  constexpr uint32_t kW = kCmdWrite | kCmdKvcache;
  constexpr uint32_t kWd = kW | kCmdDenyOom;
  size_t first = out->size();
  out->push_back({"GET", 2, kR | kCmdFast, 1, 1, 1, Get, "Gets the value of a string key.",
                  "string", "1.0.0", "key"});
  out->push_back({"SET", -3, kWd, 1, 1, 1, Set,
                  "SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts|KEEPTTL].", "string",
                  "1.0.0",
                  "key value [NX | XX] [GET] [EX seconds | PX milliseconds | EXAT "
                  "unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]"});
  out->push_back({"SETEX", 4, kWd, 1, 1, 1, SetEx, "SETEX key seconds value.", "string", "2.0.0",
                  "key seconds value"});
  out->push_back({"PSETEX", 4, kWd, 1, 1, 1, PSetEx, "PSETEX key milliseconds value.", "string",
                  "2.6.0", "key milliseconds value"});
  out->push_back({"SETNX", 3, kWd | kCmdFast, 1, 1, 1, SetNx, "Sets a key only if it is absent.",
                  "string", "1.0.0", "key value"});
  out->push_back({"GETDEL", 2, kW | kCmdFast, 1, 1, 1, GetDel, "Gets a value and deletes the key.",
                  "string", "6.2.0", "key"});
  out->push_back({"GETEX", -2, kW | kCmdFast, 1, 1, 1, GetEx,
                  "GETEX key [EX s|PX ms|EXAT ts|PXAT ts|PERSIST].", "string", "6.2.0",
                  "key [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT "
                  "unix-time-milliseconds | PERSIST]"});
  out->push_back({"MGET", -2, kR | kCmdFast, 1, -1, 1, MGet, "Gets the values of several keys.",
                  "string", "1.0.0", "key..."});
  out->push_back({"MSET", -3, kWd, 1, -1, 2, MSet, "Sets several keys atomically.", "string",
                  "1.0.1", "(key value)..."});
  out->push_back({"MSETNX", -3, kWd, 1, -1, 2, MSetNx,
                  "Sets several keys atomically only if none exists.", "string", "1.0.1",
                  "(key value)..."});
  out->push_back({"APPEND", 3, kWd, 1, 1, 1, Append, "Appends to a string value.", "string",
                  "2.0.0", "key value"});
  out->push_back({"STRLEN", 2, kR | kCmdFast, 1, 1, 1, StrLen, "Length of a string value.",
                  "string", "2.2.0", "key"});
  out->push_back({"GETRANGE", 4, kR, 1, 1, 1, GetRange, "A substring of a string value.", "string",
                  "2.4.0", "key start end"});
  out->push_back({"SUBSTR", 4, kR, 1, 1, 1, GetRange, "GETRANGE's former name.", "string", "1.0.0",
                  "key start end"});
  // ACL: the string commands are @string (as Redis).
  for (size_t i = first; i < out->size(); ++i) {
    CommandSpec& s = (*out)[i];
    std::string_view n = s.name;
    s.acl_categories |= kAclString;
    if (n == "GETDEL" || n == "GETEX") s.acl_key_flags |= kAclKeyAccess;
    if (n == "SET") s.acl_key_flags |= kAclKeyAccessIfGet;
  }
}

}  // namespace pion::server
