// DUMP and RESTORE of string keys (docs/protocol.md "Keys") in Redis's
// payload format (commands/rdb_payload.h), so payloads move between pion and
// Redis either way. RESTORE's options and texts are Redis 7.0's; FREQ is
// checked and ignored (pion has no LFU policy).
#include <climits>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/command_table.h"
#include "server/commands/rdb_payload.h"
#include "store/key_ops.h"
#include "store/store.h"
#include "store/string_ops.h"

namespace pion::server {

namespace {

void Dump(CommandContext& ctx) {
  auto r = store::OpGet({*ctx.env->store()}, ctx.args[1]);
  if (!r.ok()) {
    if (r.status().code() == Code::kWrongType) return ctx.reply->Error(kErrDumpKvPrefix);
    return ReplyStatus(ctx, r.status());
  }
  if (!*r) return ctx.reply->Null();
  if ((*r)->quantized()) return ctx.reply->Error(kErrBlockQuantized);  // no RDB form
  ctx.reply->Bulk(DumpString((*r)->view()));
}

// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]
void Restore(CommandContext& ctx) {
  bool replace = false, absttl = false;
  int64_t idle = -1, freq = -1;
  for (size_t j = 4; j < ctx.args.size(); ++j) {
    std::string_view a = ctx.args[j];
    bool more = j + 1 < ctx.args.size();
    if (IsKeyword(a, "REPLACE")) {
      replace = true;
    } else if (IsKeyword(a, "ABSTTL")) {
      absttl = true;
    } else if (IsKeyword(a, "IDLETIME") && more && freq == -1) {
      auto v = ParseInt64Strict(ctx.args[++j]);
      if (!v) return ctx.reply->Error(kErrNotInteger);
      if (*v < 0) return ctx.reply->Error(kErrRestoreIdle);
      idle = *v;
    } else if (IsKeyword(a, "FREQ") && more && idle == -1) {
      auto v = ParseInt64Strict(ctx.args[++j]);
      if (!v) return ctx.reply->Error(kErrNotInteger);
      if (*v < 0 || *v > 255) return ctx.reply->Error(kErrRestoreFreq);
      freq = *v;
    } else {
      return ctx.reply->Error(kErrSyntaxError);
    }
  }
  store::Store* st = ctx.env->store();
  std::string_view key = ctx.args[1];
  if (!replace && store::OpExists({*st}, std::span<const std::string_view>(&key, 1)) > 0)
    return ctx.reply->Error(kErrBusyKey);
  auto ttl = ParseInt64Strict(ctx.args[2]);
  if (!ttl) return ctx.reply->Error(kErrNotInteger);
  if (*ttl < 0) return ctx.reply->Error(kErrRestoreTtl);
  PayloadError perr;
  auto value = RestoreString(ctx.args[3], &perr);
  if (!value) {
    return ctx.reply->Error(perr == PayloadError::kVersionOrChecksum ? kErrDumpPayload
                                                                     : kErrBadDataFormat);
  }
  int64_t at = *ttl;
  int64_t now = UnixMillis();
  if (at != 0 && !absttl) at = at > LLONG_MAX - now ? LLONG_MAX : at + now;
  uint64_t lsn = 0;
  if (at != 0 && at <= now) {
    // Already expired: the key is only removed (REPLACE), as Redis.
    if (replace) {
      auto r = store::OpDelete({*st, &lsn}, std::span<const std::string_view>(&key, 1));
      ctx.wait_lsn = lsn;
      if (!r.ok()) return ReplyStatus(ctx, r.status());
    }
    return ctx.reply->SimpleString("OK");
  }
  store::StrRef v = store::StrValue::Copy(*value);
  if (!v) return ctx.reply->Error(kErrNoMemory);
  store::SetOptions o;
  o.cond = replace ? store::SetOptions::Cond::kAlways : store::SetOptions::Cond::kNx;
  o.expire_at_ms = at;
  auto r = store::OpSet({*st, &lsn}, key, std::move(v), o);
  ctx.wait_lsn = lsn;
  if (!r.ok()) return ReplyStatus(ctx, r.status());
  if (!r->done) return ctx.reply->Error(kErrBusyKey);
  if (idle > 0) store::OpSetIdleTime({*st}, key, static_cast<uint64_t>(idle));
  ctx.reply->SimpleString("OK");
}

}  // namespace

void AddDumpRestoreCommands(std::vector<CommandSpec>* out) {
  size_t first = out->size();
  out->push_back({"DUMP", 2, kCmdReadonly | kCmdKvcache, 1, 1, 1, Dump,
                  "Returns a serialized representation of the value stored at a key.", "generic",
                  "2.6.0", "key"});
  out->push_back(
      {"RESTORE", -4, kCmdWrite | kCmdKvcache | kCmdDenyOom, 1, 1, 1, Restore,
       "Creates a key from the serialized representation of a value.", "generic", "2.6.0",
       "key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]"});
  for (size_t i = first; i < out->size(); ++i) (*out)[i].acl_categories |= kAclKeyspace;
  (*out)[first + 1].acl_categories |= kAclDangerous;  // as Redis
}

}  // namespace pion::server
