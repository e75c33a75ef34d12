// Generic key commands (docs/protocol.md "Keys"): EXISTS, DEL/UNLINK, TYPE,
// RENAME/RENAMENX, KEYS, SCAN, RANDOMKEY, the EXPIRE/TTL family and PERSIST.
// They work on every key type (string keys and namespaces); the string
// commands are commands/strings.cc.
#include <algorithm>
#include <climits>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/acl.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/command_table.h"
#include "server/commands/key_events.h"
#include "store/key_ops.h"
#include "store/store.h"

namespace pion::server {

namespace {

void Exists(CommandContext& ctx) {
  ctx.reply->Integer(
      static_cast<int64_t>(store::OpExists({*ctx.env->store()}, ctx.args.subspan(1))));
  NotifyMisses(ctx, ctx.args.subspan(1));
}

void Del(CommandContext& ctx) {
  // A namespace's descendants go with it: as KV.PREFIX.DROP, each needs the
  // write permission the named keys needed at admission, or nothing is deleted.
  const AclUser* u = ctx.env->ClientUser(ctx.client);
  std::string denied;
  std::function<bool(std::string_view)> may_drop = SubtreeWriteCheck(u, &denied);
  uint64_t lsn = 0;
  // The names `del` is sent for (a namespace's, for one of its session ids).
  std::vector<std::string> gone;
  if (ctx.env->NotifyWanted(kNotifyGeneric)) {
    for (std::string_view k : ctx.args.subspan(1)) {
      store::KeyType t = store::OpType({*ctx.env->store()}, k);
      if (t == store::KeyType::kString) gone.emplace_back(k);
      if (t == store::KeyType::kKvPrefix) gone.emplace_back(AclKeyOwner(k));
    }
  }
  auto r = store::OpDelete({*ctx.env->store(), &lsn}, ctx.args.subspan(1), may_drop);
  ctx.wait_lsn = lsn;
  if (!r.ok() && r.status().reason<store::Reason>() == store::Reason::kDropRefused) {
    ctx.env->acl().Log("key", denied, u != nullptr ? u->name : "",
                       ctx.env->control().ClientLine(ctx.client),
                       ctx.in_exec ? kAclLogMulti : kAclLogTopLevel);
    ctx.reply->Error(kErrNoPermKey);
    return;
  }
  if (!OkOrReply(ctx, r.status())) return;
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
  store::KeyType t = store::OpType({*ctx.env->store()}, ctx.args[1]);
  if (t == store::KeyType::kNone) Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
  ctx.reply->SimpleString(TypeName(t));
}

void RenameCommon(CommandContext& ctx, bool nx) {
  uint64_t lsn = 0;
  bool done = false;
  Status st = store::OpRename({*ctx.env->store(), &lsn}, ctx.args[1], ctx.args[2], nx, &done);
  ctx.wait_lsn = lsn;
  if (st.code() == Code::kNotFound) {
    ctx.reply->Error(kErrNoSuchKey);
    return;
  }
  if (st.code() == Code::kNotSupported) {
    ctx.reply->Error(kErrRenameKvPrefix);
    return;
  }
  if (!OkOrReply(ctx, st)) return;
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
  const AclUser* u = ctx.client != nullptr ? ctx.env->ClientUser(ctx.client) : nullptr;
  if (ctx.client == nullptr || (u != nullptr && u->allkeys)) return keys;
  return AclVisibleKeys(u, std::move(keys), kAclPermRead);
}

void Keys(CommandContext& ctx) {
  auto keys = VisibleKeys(ctx, store::OpKeys({*ctx.env->store()}, ctx.args[1]));
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
  store::ScanResult r = store::OpScan({*ctx.env->store()}, *cur, count, match, type);
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
  auto k = store::OpRandomKey({*ctx.env->store()});
  const AclUser* u = ctx.client != nullptr ? ctx.env->ClientUser(ctx.client) : nullptr;
  if (k && ctx.client != nullptr && (u == nullptr || !u->allkeys) &&
      (u == nullptr || !u->KeyAllowed(*k, kAclPermRead))) {
    // A user with key patterns: a random key among those it may read.
    auto keys = AclVisibleKeys(u, store::OpKeys({*ctx.env->store()}, "*"), kAclPermRead);
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
    int64_t now = UnixMillis();
    if (ms > LLONG_MAX - now) {
      ctx.reply->Error(InvalidExpireError(cmd));
      return;
    }
    ms += now;
  }
  if (ms <= 0) ms = 1;  // in the past: the key is deleted
  uint64_t lsn = 0;
  auto r = store::OpExpire({*ctx.env->store(), &lsn}, ctx.args[1], ms, c);
  ctx.wait_lsn = lsn;
  if (!OkOrReply(ctx, r.status())) return;
  // A time in the past deletes the key: Redis reports `del`, not `expired`.
  if (*r) Notify(ctx, kNotifyGeneric, ms <= UnixMillis() ? "del" : "expire", ctx.args[1]);
  ctx.reply->Integer(*r ? 1 : 0);
}

void Expire(CommandContext& ctx) { ExpireCommon(ctx, 1000, false, "expire"); }
void PExpire(CommandContext& ctx) { ExpireCommon(ctx, 1, false, "pexpire"); }
void ExpireAt(CommandContext& ctx) { ExpireCommon(ctx, 1000, true, "expireat"); }
void PExpireAt(CommandContext& ctx) { ExpireCommon(ctx, 1, true, "pexpireat"); }

void TtlCommon(CommandContext& ctx, bool ms, bool absolute) {
  int64_t at = store::OpExpireTimeMs({*ctx.env->store()}, ctx.args[1]);
  if (at == -2) Notify(ctx, kNotifyKeyMiss, "keymiss", ctx.args[1]);
  if (at < 0) {
    ctx.reply->Integer(at);
    return;
  }
  if (absolute) {
    ctx.reply->Integer(ms ? at : at / 1000);
    return;
  }
  int64_t left = at - UnixMillis();
  if (left < 0) left = 0;
  ctx.reply->Integer(ms ? left : (left + 500) / 1000);
}

void Ttl(CommandContext& ctx) { TtlCommon(ctx, false, false); }
void PTtl(CommandContext& ctx) { TtlCommon(ctx, true, false); }
void ExpireTime(CommandContext& ctx) { TtlCommon(ctx, false, true); }
void PExpireTime(CommandContext& ctx) { TtlCommon(ctx, true, true); }

void Persist(CommandContext& ctx) {
  uint64_t lsn = 0;
  auto r = store::OpPersist({*ctx.env->store(), &lsn}, ctx.args[1]);
  ctx.wait_lsn = lsn;
  if (!OkOrReply(ctx, r.status())) return;
  if (*r) Notify(ctx, kNotifyGeneric, "persist", ctx.args[1]);
  ctx.reply->Integer(*r ? 1 : 0);
}

}  // namespace

void AddKeyCommands(std::vector<CommandSpec>* out) {
  constexpr uint32_t kR = kCmdReadonly | kCmdKvcache;
  constexpr uint32_t kW = kCmdWrite | kCmdKvcache;
  size_t first = out->size();
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
  // ACL: generic key commands are @keyspace (as Redis); KEYS lists the whole
  // keyspace (@dangerous, as Redis; it filters anyway).
  for (size_t i = first; i < out->size(); ++i) {
    CommandSpec& s = (*out)[i];
    std::string_view n = s.name;
    s.acl_categories |= kAclKeyspace;
    if (n == "KEYS") s.acl_categories |= kAclDangerous;
    if (n == "RENAME" || n == "RENAMENX") s.acl_key_flags |= kAclKeyAccess;
    // DEL of "<ns>_pk" drops the namespace <ns>: checked as both.
    if (n == "DEL" || n == "UNLINK") s.acl_key_flags |= kAclKeyAlsoOwner;
  }
}

}  // namespace pion::server
