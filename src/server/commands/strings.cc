// String and generic key commands (docs/protocol.md "Keys"): GET, SET and its
// variants, MGET/MSET, APPEND, STRLEN, GETRANGE/SUBSTR, EXISTS, DEL/UNLINK, TYPE,
// RENAME, KEYS, SCAN, RANDOMKEY, the EXPIRE/TTL family and FLUSHDB (MEMORY is
// commands/memory.cc). The values live in the store (store/strings.h); GET of a large value
// sends the stored buffer by reference (writev, no copy).
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
#include "server/commands/args.h"
#include "server/commands/block_format.h"
#include "server/commands/command_table.h"
#include "server/commands/dispatch.h"
#include "server/commands/strings_tier.h"
#include "server/kv_events.h"
#include "server/server.h"
#include "store/store.h"

namespace pion::server {

namespace {

int64_t NowMs() { return static_cast<int64_t>(UnixMicros() / 1000); }

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
    if (ms > LLONG_MAX - NowMs()) return ExpireErr::kInvalid;
    ms += NowMs();
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

// Keyspace notifications (server/notify.h; Redis 7.0's events for the same
// commands). `new` needs a look before the write, taken only when someone
// could hear it.
void Notify(CommandContext& ctx, uint32_t type, std::string_view event, std::string_view key) {
  ctx.server->NotifyKeyspaceEvent(type, event, key);
}
bool KeyAbsent(CommandContext& ctx, std::string_view key) {
  return ctx.server->NotifyWanted(kNotifyNew) &&
         ctx.server->store()->TypeOf(key) == store::KeyType::kNone;
}
void NotifyMisses(CommandContext& ctx, std::span<const std::string_view> keys) {
  if (!ctx.server->NotifyWanted(kNotifyKeyMiss)) return;
  for (std::string_view k : keys)
    if (ctx.server->store()->TypeOf(k) == store::KeyType::kNone)
      Notify(ctx, kNotifyKeyMiss, "keymiss", k);
}

bool Reply(CommandContext& ctx, const Status& st) {
  if (st.ok()) return true;
  ctx.reply->Error(StatusToError(st));
  return false;
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
  Status st = ctx.server->store()->StrGetWith(
      ctx.args[1],
      [&seen](const store::StrRef& v) {
        seen.miss = v == nullptr;
        if (v != nullptr && v->on_disk())
          seen.on_disk = v;  // read below, outside the shard lock
        else
          ReplyValue(*seen.ctx, v);
      },
      /*tiered_as_is=*/seen.can_defer);
  if (!st.ok()) return (void)Reply(ctx, st);
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
  auto r = ctx.server->store()->StrSet(ctx.args[1], std::move(v), o, &lsn);
  ctx.wait_lsn = lsn;
  if (!r.ok()) return (void)Reply(ctx, r.status());
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
  auto r = ctx.server->store()->StrSet(ctx.args[1], std::move(v), o, &lsn);
  ctx.wait_lsn = lsn;
  if (!Reply(ctx, r.status())) return;
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
  auto r = ctx.server->store()->StrSet(ctx.args[1], std::move(v), o, &lsn);
  ctx.wait_lsn = lsn;
  if (!Reply(ctx, r.status())) return;
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
  auto r = ctx.server->store()->StrGetDel(ctx.args[1], &lsn, /*tiered_as_is=*/can_defer);
  ctx.wait_lsn = lsn;
  if (!Reply(ctx, r.status())) return;
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
      auto r = ctx.server->store()->StrGetEx(ctx.args[1], false, 0, &lsn, /*tiered_as_is=*/true);
      if (!Reply(ctx, r.status())) return;
      if (*r != nullptr) return ReplyExpireErr(ctx, e, "getex");
      Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
      return ReplyValue(ctx, nullptr);
    }
  }
  uint64_t lsn = 0;
  // PERSIST notifies only when it removed a TTL.
  bool had_ttl = persist && ctx.server->NotifyWanted(kNotifyGeneric) &&
                 ctx.server->store()->ExpireTimeMs(ctx.args[1]) >= 0;
  const bool can_defer = ctx.CanDefer();  // a value on disk: read without blocking
  auto r = ctx.server->store()->StrGetEx(ctx.args[1], persist, at, &lsn, can_defer);
  ctx.wait_lsn = lsn;
  if (!Reply(ctx, r.status())) return;
  if (*r == nullptr)
    Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
  else if (at > 0)
    Notify(ctx, kNotifyGeneric, at <= NowMs() ? "del" : "expire", ctx.args[1]);
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
  Server* server;
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
    store::Store* st = m->server->store();
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
  auto vals = ctx.server->store()->StrMGet(ctx.args.subspan(1), /*tiered_as_is=*/can_defer);
  if (ctx.server->NotifyWanted(kNotifyKeyMiss))
    for (size_t i = 0; i < vals.size(); ++i)
      if (vals[i] == nullptr &&
          ctx.server->store()->TypeOf(ctx.args[i + 1]) != store::KeyType::kKvPrefix)
        Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[i + 1]);
  if (can_defer) {
    auto m = std::make_shared<MGetFromDisk>();
    for (size_t i = 0; i < vals.size(); ++i)
      if (vals[i] != nullptr && vals[i]->on_disk()) {
        m->keys.emplace_back(ctx.args[i + 1]);
        m->at.push_back(i);
      }
    if (!m->keys.empty()) {
      m->server = ctx.server;
      m->done = ctx.Defer();
      m->vals = std::move(vals);
      m->fresh.resize(m->keys.size());
      m->failed.resize(m->keys.size(), Code::kOk);
      m->left.store(m->keys.size(), std::memory_order_relaxed);
      for (size_t j = 0; j < m->keys.size(); ++j)
        m->server->store()->ReadTiered(m->keys[j], m->vals[m->at[j]],
                                       [m, j](Result<store::StrRef> r) {
                                         if (r.ok())
                                           m->fresh[j] = *r;
                                         else
                                           m->failed[j] = r.status().code();
                                         if (m->left.fetch_sub(1, std::memory_order_acq_rel) == 1)
                                           CompleteMGet(m);
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
  if (ctx.server->NotifyWanted(kNotifyNew))
    for (size_t i = 1; i < ctx.args.size(); i += 2) absent.push_back(KeyAbsent(ctx, ctx.args[i]));
  auto r = ctx.server->store()->StrMSet(ctx.args.subspan(1), nx, &lsn, made);
  ctx.wait_lsn = lsn;
  if (!Reply(ctx, r.status())) return;
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
  auto r =
      ctx.server->store()->StrAppend(ctx.args[1], ctx.args[2], &lsn, AdoptArg(ctx, ctx.args[2]),
                                     ctx.server->config().proto_max_bulk_len);
  ctx.wait_lsn = lsn;
  if (!Reply(ctx, r.status())) return;
  if (absent) Notify(ctx, kNotifyNew, "new", ctx.args[1]);
  Notify(ctx, kNotifyString, "append", ctx.args[1]);
  ctx.reply->Integer(static_cast<int64_t>(*r));
}

void StrLen(CommandContext& ctx) {
  auto r = ctx.server->store()->StrGet(ctx.args[1]);
  if (!Reply(ctx, r.status())) return;
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
  Status st = ctx.server->store()->StrGetWith(
      ctx.args[1], [&v](const store::StrRef& got) { v = got; }, /*tiered_as_is=*/can_defer);
  if (!Reply(ctx, st)) return;
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

void Exists(CommandContext& ctx) {
  ctx.reply->Integer(static_cast<int64_t>(ctx.server->store()->KeysExist(ctx.args.subspan(1))));
  NotifyMisses(ctx, ctx.args.subspan(1));
}

void Del(CommandContext& ctx) {
  // A namespace's descendants go with it: as KV.PREFIX.DROP, each needs the
  // write permission the named keys needed at admission, or nothing is deleted.
  const AclUser* u = ctx.server->ClientUser(ctx.client);
  std::string denied;
  std::function<bool(std::string_view)> may_drop = SubtreeWriteCheck(u, &denied);
  uint64_t lsn = 0;
  // The names `del` is sent for (a namespace's, for one of its session ids).
  std::vector<std::string> gone;
  if (ctx.server->NotifyWanted(kNotifyGeneric)) {
    for (std::string_view k : ctx.args.subspan(1)) {
      store::KeyType t = ctx.server->store()->TypeOf(k);
      if (t == store::KeyType::kString) gone.emplace_back(k);
      if (t == store::KeyType::kKvPrefix) gone.emplace_back(AclKeyOwner(k));
    }
  }
  auto r = ctx.server->store()->KeysDelete(ctx.args.subspan(1), &lsn, may_drop);
  ctx.wait_lsn = lsn;
  if (!r.ok() && r.status().reason<store::Reason>() == store::Reason::kDropRefused) {
    ctx.server->acl().Log("key", denied, u != nullptr ? u->name : "",
                          ctx.server->ClientLine(ctx.client),
                          ctx.in_exec ? kAclLogMulti : kAclLogTopLevel);
    ctx.reply->Error(kErrNoPermKey);
    return;
  }
  if (!Reply(ctx, r.status())) return;
  for (size_t i = 0; i < gone.size(); ++i)
    if (std::find(gone.begin(), gone.begin() + i, gone[i]) == gone.begin() + i)
      Notify(ctx, kNotifyGeneric, "del", gone[i]);
  ctx.reply->Integer(static_cast<int64_t>(*r));
}

const char* TypeName(store::KeyType t) {
  switch (t) {
    case store::KeyType::kString:
      return "string";
    case store::KeyType::kKvPrefix:
      return "pion-kvprefix";
    case store::KeyType::kNone:
      break;
  }
  return "none";
}

void Type(CommandContext& ctx) {
  store::KeyType t = ctx.server->store()->TypeOf(ctx.args[1]);
  if (t == store::KeyType::kNone) Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
  ctx.reply->SimpleString(TypeName(t));
}

void RenameCommon(CommandContext& ctx, bool nx) {
  uint64_t lsn = 0;
  bool done = false;
  Status st = ctx.server->store()->Rename(ctx.args[1], ctx.args[2], nx, &done, &lsn);
  ctx.wait_lsn = lsn;
  if (st.code() == Code::kNotFound) {
    ctx.reply->Error(kErrNoSuchKey);
    return;
  }
  if (st.code() == Code::kNotSupported) {
    ctx.reply->Error(kErrRenameKvPrefix);
    return;
  }
  if (!Reply(ctx, st)) return;
  if (done && ctx.args[1] != ctx.args[2]) {
    // Redis adds the target (`new`, even over an existing key: it deletes that
    // one first), then reports both names.
    Notify(ctx, kNotifyNew, "new", ctx.args[2]);
    Notify(ctx, kNotifyGeneric, "rename_from", ctx.args[1]);
    Notify(ctx, kNotifyGeneric, "rename_to", ctx.args[2]);
  }
  if (nx)
    ctx.reply->Integer(done ? 1 : 0);
  else
    ctx.reply->SimpleString("OK");
}

void Rename(CommandContext& ctx) { RenameCommon(ctx, false); }
void RenameNx(CommandContext& ctx) { RenameCommon(ctx, true); }

// The keys of `keys` the client's user may read: all of them (no copy, no
// check) for a user without key patterns.
std::vector<std::string> VisibleKeys(CommandContext& ctx, std::vector<std::string> keys) {
  const AclUser* u = ctx.client != nullptr ? ctx.server->ClientUser(ctx.client) : nullptr;
  if (ctx.client == nullptr || (u != nullptr && u->allkeys)) return keys;
  return AclVisibleKeys(u, std::move(keys), kAclPermRead);
}

void Keys(CommandContext& ctx) {
  auto keys = VisibleKeys(ctx, ctx.server->store()->Keys(ctx.args[1]));
  ctx.reply->ArrayHeader(keys.size());
  // As Redis, the output limit is checked as the reply grows: past the hard
  // limit KEYS stops and the client is closed without the reply.
  net::ClientControl* cc = ctx.client != nullptr ? ctx.client->control : nullptr;
  for (size_t i = 0; i < keys.size(); ++i) {
    ctx.reply->Bulk(keys[i]);
    if (cc != nullptr && i % 64 == 63 && cc->ReplyOverOutputLimit()) return;
  }
}

// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
// A SCAN cursor read as Redis reads it (strtoul): an optional sign, decimal
// digits, nothing else; "-1" is 2^64-1. Nullopt: "invalid cursor".
std::optional<uint64_t> ParseScanCursor(std::string_view s) {
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size()) return s.empty() ? std::optional<uint64_t>(0) : std::nullopt;
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;  // ERANGE
    v = v * 10 + d;
  }
  return negative ? uint64_t{0} - v : v;
}

void Scan(CommandContext& ctx) {
  auto cur = ParseScanCursor(ctx.args[1]);
  if (!cur) {
    ctx.reply->Error(kErrInvalidCursor);
    return;
  }
  std::optional<std::string_view> match;
  uint64_t count = 10;
  store::KeyType type = store::KeyType::kNone;
  bool unknown_type = false;
  for (size_t i = 2; i < ctx.args.size(); i += 2) {
    if (i + 1 >= ctx.args.size()) {
      ctx.reply->Error(kErrSyntaxError);
      return;
    }
    std::string_view a = ctx.args[i], v = ctx.args[i + 1];
    if (IsKeyword(a, "MATCH")) {
      if (v != "*") match = v;
    } else if (IsKeyword(a, "COUNT")) {
      auto c = ParseInt64Strict(v);
      if (!c) {
        ctx.reply->Error(kErrNotInteger);
        return;
      }
      if (*c < 1) {
        ctx.reply->Error(kErrSyntaxError);
        return;
      }
      count = static_cast<uint64_t>(std::min<int64_t>(*c, 1 << 20));
    } else if (IsKeyword(a, "TYPE")) {
      if (IsKeyword(v, "string"))
        type = store::KeyType::kString;
      else if (IsKeyword(v, "pion-kvprefix"))
        type = store::KeyType::kKvPrefix;
      else
        unknown_type = true;  // no key has it
    } else {
      ctx.reply->Error(kErrSyntaxError);
      return;
    }
  }
  store::ScanResult r = ctx.server->store()->Scan(*cur, count, match, type);
  // A user with key patterns sees only the keys it may read (a call may return
  // fewer than COUNT, even none, with a cursor that goes on: as Redis allows).
  r.keys = VisibleKeys(ctx, std::move(r.keys));
  ctx.reply->ArrayHeader(2);
  ctx.reply->Bulk(std::to_string(r.cursor));
  if (unknown_type) {
    ctx.reply->ArrayHeader(0);
    return;
  }
  ctx.reply->ArrayHeader(r.keys.size());
  for (const auto& k : r.keys) ctx.reply->Bulk(k);
}

void RandomKey(CommandContext& ctx) {
  auto k = ctx.server->store()->RandomKey();
  const AclUser* u = ctx.client != nullptr ? ctx.server->ClientUser(ctx.client) : nullptr;
  if (k && ctx.client != nullptr && (u == nullptr || !u->allkeys) &&
      (u == nullptr || !u->KeyAllowed(*k, kAclPermRead))) {
    // A user with key patterns: a random key among those it may read.
    auto keys = AclVisibleKeys(u, ctx.server->store()->Keys("*"), kAclPermRead);
    k.reset();
    if (!keys.empty()) k = std::move(keys[UnixMicros() % keys.size()]);
  }
  if (!k)
    ctx.reply->Null();
  else
    ctx.reply->Bulk(*k);
}

// EXPIRE key n [NX|XX|GT|LT] and friends.
void ExpireCommon(CommandContext& ctx, int64_t unit_ms, bool absolute, std::string_view cmd) {
  auto v = ParseInt64Strict(ctx.args[2]);
  if (!v) {
    ctx.reply->Error(kErrNotInteger);
    return;
  }
  store::ExpireCond c = store::ExpireCond::kAlways;
  bool nx = false, xx = false, gt = false, lt = false;
  for (size_t i = 3; i < ctx.args.size(); ++i) {
    std::string_view a = ctx.args[i];
    if (IsKeyword(a, "NX"))
      nx = true;
    else if (IsKeyword(a, "XX"))
      xx = true;
    else if (IsKeyword(a, "GT"))
      gt = true;
    else if (IsKeyword(a, "LT"))
      lt = true;
    else {
      ctx.reply->Error(UnsupportedOptionError(a));
      return;
    }
  }
  if (nx && (xx || gt || lt)) {
    ctx.reply->Error(kErrExpireNxCombo);
    return;
  }
  if (gt && lt) {
    ctx.reply->Error(kErrExpireGtLt);
    return;
  }
  if (nx) c = store::ExpireCond::kNx;
  if (xx) c = store::ExpireCond::kXx;
  if (gt) c = store::ExpireCond::kGt;
  if (lt) c = xx ? store::ExpireCond::kLtXx : store::ExpireCond::kLt;
  int64_t n = *v;
  if (n > LLONG_MAX / unit_ms || n < LLONG_MIN / unit_ms) {
    ctx.reply->Error(InvalidExpireError(cmd));
    return;
  }
  int64_t ms = n * unit_ms;
  if (!absolute) {
    int64_t now = NowMs();
    if (ms > LLONG_MAX - now) {
      ctx.reply->Error(InvalidExpireError(cmd));
      return;
    }
    ms += now;
  }
  if (ms <= 0) ms = 1;  // in the past: the key is deleted
  uint64_t lsn = 0;
  auto r = ctx.server->store()->Expire(ctx.args[1], ms, c, &lsn);
  ctx.wait_lsn = lsn;
  if (!Reply(ctx, r.status())) return;
  // A time in the past deletes the key: Redis reports `del`, not `expired`.
  if (*r) Notify(ctx, kNotifyGeneric, ms <= NowMs() ? "del" : "expire", ctx.args[1]);
  ctx.reply->Integer(*r ? 1 : 0);
}

void Expire(CommandContext& ctx) { ExpireCommon(ctx, 1000, false, "expire"); }
void PExpire(CommandContext& ctx) { ExpireCommon(ctx, 1, false, "pexpire"); }
void ExpireAt(CommandContext& ctx) { ExpireCommon(ctx, 1000, true, "expireat"); }
void PExpireAt(CommandContext& ctx) { ExpireCommon(ctx, 1, true, "pexpireat"); }

void TtlCommon(CommandContext& ctx, bool ms, bool absolute) {
  int64_t at = ctx.server->store()->ExpireTimeMs(ctx.args[1]);
  if (at == -2) Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
  if (at < 0) {
    ctx.reply->Integer(at);
    return;
  }
  if (absolute) {
    ctx.reply->Integer(ms ? at : at / 1000);
    return;
  }
  int64_t left = at - NowMs();
  if (left < 0) left = 0;
  ctx.reply->Integer(ms ? left : (left + 500) / 1000);
}

void Ttl(CommandContext& ctx) { TtlCommon(ctx, false, false); }
void PTtl(CommandContext& ctx) { TtlCommon(ctx, true, false); }
void ExpireTime(CommandContext& ctx) { TtlCommon(ctx, false, true); }
void PExpireTime(CommandContext& ctx) { TtlCommon(ctx, true, true); }

void Persist(CommandContext& ctx) {
  uint64_t lsn = 0;
  auto r = ctx.server->store()->Persist(ctx.args[1], &lsn);
  ctx.wait_lsn = lsn;
  if (!Reply(ctx, r.status())) return;
  if (*r) Notify(ctx, kNotifyGeneric, "persist", ctx.args[1]);
  ctx.reply->Integer(*r ? 1 : 0);
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
  out->push_back({"EXISTS", -2, kR | kCmdFast, 1, -1, 1, Exists, "How many of the keys exist.",
                  "generic", "1.0.0", "key..."});
  out->push_back({"DEL", -2, kW, 1, -1, 1, Del, "Deletes keys (a namespace key: KV.PREFIX.DROP).",
                  "generic", "1.0.0", "key..."});
  out->push_back({"UNLINK", -2, kW | kCmdFast, 1, -1, 1, Del, "DEL (memory is freed lazily).",
                  "generic", "4.0.0", "key..."});
  out->push_back({"TYPE", 2, kR | kCmdFast, 1, 1, 1, Type,
                  "Type of a key: string, pion-kvprefix or none.", "generic", "1.0.0", "key"});
  out->push_back({"RENAME", 3, kW, 1, 2, 1, Rename, "Renames a string key.", "generic", "1.0.0",
                  "key newkey"});
  out->push_back({"RENAMENX", 3, kW | kCmdFast, 1, 2, 1, RenameNx,
                  "Renames a string key if the new name is free.", "generic", "1.0.0",
                  "key newkey"});
  out->push_back({"KEYS", 2, kR, 0, 0, 0, Keys, "Every key matching a glob pattern.", "generic",
                  "1.0.0", "pattern"});
  out->push_back({"SCAN", -2, kR, 0, 0, 0, Scan,
                  "SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].", "generic", "2.8.0",
                  "cursor [MATCH pattern] [COUNT count] [TYPE type]"});
  out->push_back({"RANDOMKEY", 1, kR, 0, 0, 0, RandomKey, "A random key.", "generic", "1.0.0", ""});
  out->push_back({"EXPIRE", -3, kW | kCmdFast, 1, 1, 1, Expire, "Sets a TTL in seconds.", "generic",
                  "1.0.0", "key seconds [NX | XX | GT | LT]"});
  out->push_back({"PEXPIRE", -3, kW | kCmdFast, 1, 1, 1, PExpire, "Sets a TTL in milliseconds.",
                  "generic", "2.6.0", "key milliseconds [NX | XX | GT | LT]"});
  out->push_back({"EXPIREAT", -3, kW | kCmdFast, 1, 1, 1, ExpireAt,
                  "Sets the expiry as a unix time in seconds.", "generic", "1.2.0",
                  "key unix-time-seconds [NX | XX | GT | LT]"});
  out->push_back({"PEXPIREAT", -3, kW | kCmdFast, 1, 1, 1, PExpireAt,
                  "Sets the expiry as a unix time in milliseconds.", "generic", "2.6.0",
                  "key unix-time-milliseconds [NX | XX | GT | LT]"});
  out->push_back({"TTL", 2, kR | kCmdFast, 1, 1, 1, Ttl, "Seconds to live (-1 none, -2 missing).",
                  "generic", "1.0.0", "key"});
  out->push_back({"PTTL", 2, kR | kCmdFast, 1, 1, 1, PTtl, "Milliseconds to live.", "generic",
                  "2.6.0", "key"});
  out->push_back({"EXPIRETIME", 2, kR | kCmdFast, 1, 1, 1, ExpireTime,
                  "Expiry as a unix time in seconds.", "generic", "7.0.0", "key"});
  out->push_back({"PEXPIRETIME", 2, kR | kCmdFast, 1, 1, 1, PExpireTime,
                  "Expiry as a unix time in milliseconds.", "generic", "7.0.0", "key"});
  out->push_back({"PERSIST", 2, kW | kCmdFast, 1, 1, 1, Persist, "Removes a key's TTL.", "generic",
                  "2.2.0", "key"});
  // ACL: string commands are @string, generic key commands @keyspace (as Redis);
  // KEYS lists the whole keyspace (@dangerous, as Redis; it filters anyway).
  for (size_t i = first; i < out->size(); ++i) {
    CommandSpec& s = (*out)[i];
    std::string_view n = s.name;
    bool str = n == "GET" || n == "SET" || n == "SETEX" || n == "PSETEX" || n == "SETNX" ||
               n == "GETDEL" || n == "GETEX" || n == "MGET" || n == "MSET" || n == "MSETNX" ||
               n == "APPEND" || n == "STRLEN" || n == "GETRANGE" || n == "SUBSTR";
    s.acl_categories |= str ? kAclString : kAclKeyspace;
    if (n == "KEYS") s.acl_categories |= kAclDangerous;
    if (n == "GETDEL" || n == "GETEX" || n == "RENAME" || n == "RENAMENX")
      s.acl_key_flags |= kAclKeyAccess;
    if (n == "SET") s.acl_key_flags |= kAclKeyAccessIfGet;
    // DEL of "<ns>_pk" drops the namespace <ns>: checked as both.
    if (n == "DEL" || n == "UNLINK") s.acl_key_flags |= kAclKeyAlsoOwner;
  }
}

}  // namespace pion::server
