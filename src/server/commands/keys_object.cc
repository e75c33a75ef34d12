// Generic key commands over the string keyspace (docs/protocol.md "Keys"):
// COPY, TOUCH and OBJECT (ENCODING, IDLETIME, FREQ, REFCOUNT, HELP), with
// Redis 7.0's replies. pion has one database: COPY ... DB n accepts 0 only
// and answers Redis's "DB index is out of range" for any other index.
#include <cstdint>
#include <string>
#include <vector>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/command_table.h"
#include "store/key_ops.h"
#include "store/store.h"

namespace pion::server {

namespace {

// COPY source destination [DB destination-db] [REPLACE]
void Copy(CommandContext& ctx) {
  bool replace = false;
  for (size_t j = 3; j < ctx.args.size(); ++j) {
    std::string_view a = ctx.args[j];
    if (IsKeyword(a, "REPLACE")) {
      replace = true;
    } else if (IsKeyword(a, "DB") && j + 1 < ctx.args.size()) {
      auto db = ParseInt64Strict(ctx.args[++j]);
      if (!db || *db < INT32_MIN || *db > INT32_MAX) return ctx.reply->Error(kErrNotInteger);
      if (*db != 0) return ctx.reply->Error(kErrDbIndexRange);
    } else {
      return ctx.reply->Error(kErrSyntaxError);
    }
  }
  if (ctx.args[1] == ctx.args[2]) return ctx.reply->Error(kErrSameObject);
  uint64_t lsn = 0;
  auto r = store::OpCopy({*ctx.env->store(), &lsn}, ctx.args[1], ctx.args[2], replace);
  ctx.wait_lsn = lsn;
  if (!r.ok()) {
    if (r.status().code() == Code::kNotSupported) return ctx.reply->Error(kErrCopyKvPrefix);
    return ReplyStatus(ctx, r.status());
  }
  ctx.reply->Integer(*r ? 1 : 0);
}

void Touch(CommandContext& ctx) {
  ctx.reply->Integer(
      static_cast<int64_t>(store::OpTouch({*ctx.env->store()}, ctx.args.subspan(1))));
}

// What Redis would answer for the same value: "int" for a canonical integer
// of up to 20 characters, "embstr" up to 44 bytes, else "raw"; a value
// edited in place (APPEND, SETRANGE, SETBIT...) is "raw".
const char* EncodingOf(const store::StrValue& v, std::optional<int64_t>* as_int) {
  std::string_view s = v.view();
  if (v.edited) return "raw";
  if (s.size() <= 20) {
    *as_int = ParseInt64Strict(s);
    if (*as_int) return "int";
  }
  return s.size() <= 44 ? "embstr" : "raw";
}

void Object(CommandContext& ctx) {
  std::string_view sub = ctx.args[1];
  if (IsKeyword(sub, "HELP") && ctx.args.size() == 2) {
    static const char* kLines[] = {
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Print this help.",
    };
    ctx.reply->ArrayHeader(std::size(kLines));
    for (const char* l : kLines) ctx.reply->SimpleString(l);
    return;
  }
  bool enc = IsKeyword(sub, "ENCODING"), idle = IsKeyword(sub, "IDLETIME"),
       freq = IsKeyword(sub, "FREQ"), ref = IsKeyword(sub, "REFCOUNT");
  if (!(enc || idle || freq || ref) || ctx.args.size() != 3)
    return ctx.reply->Error(UnknownSubcommandOrArityError("OBJECT", sub));
  store::KeyObject o = store::OpObject({*ctx.env->store()}, ctx.args[2]);
  if (o.type == store::KeyType::kNone) return ctx.reply->Null();
  if (freq) {  // tracked always, reported under an LFU policy only (as Redis)
    if (!store::IsLfuPolicy(ctx.env->store()->evict_policy()))
      return ctx.reply->Error(kErrObjectFreq);
    return ctx.reply->Integer(o.freq);
  }
  if (idle) return ctx.reply->Integer(static_cast<int64_t>(o.idle_s));
  if (o.type == store::KeyType::kKvPrefix) {
    if (enc) return ctx.reply->Bulk("pion-kvprefix");
    return ctx.reply->Integer(1);
  }
  std::optional<int64_t> as_int;
  const char* e = EncodingOf(*o.value, &as_int);
  if (enc) return ctx.reply->Bulk(e);
  // Redis shares the integers 0..9999 (refcount INT_MAX) unless an LRU/LFU
  // policy with maxmemory needs per-key access data.
  const store::EvictPolicy pol = ctx.env->store()->evict_policy();
  bool lru = ctx.env->settings().maxmemory() > 0 &&
             (pol == store::EvictPolicy::kAllKeysLru || pol == store::EvictPolicy::kVolatileLru ||
              store::IsLfuPolicy(pol));
  if (as_int && *as_int >= 0 && *as_int < 10000 && !lru) return ctx.reply->Integer(INT32_MAX);
  ctx.reply->Integer(1);
}

}  // namespace

// OBJECT's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kObjectSubcommands[] = {
    {"ENCODING", "2.2.3", "key", "Returns the internal encoding of a Redis object."},
    {"FREQ", "4.0.0", "key", "Returns the logarithmic access frequency counter of a Redis object."},
    {"IDLETIME", "2.2.3", "key", "Returns the time since the last access to a Redis object."},
    {"REFCOUNT", "2.2.3", "key", "Returns the reference count of a value of a key."},
    {"HELP", "6.2.0", "", "Returns helpful text about the different subcommands."},
};

void AddKeyObjectCommands(std::vector<CommandSpec>* out) {
  constexpr uint32_t kR = kCmdReadonly | kCmdKvcache;
  size_t first = out->size();
  out->push_back({"COPY", -3, kCmdWrite | kCmdKvcache | kCmdDenyOom, 1, 2, 1, Copy,
                  "Copies the value of a key to a new key.", "generic", "6.2.0",
                  "source destination [DB destination-db] [REPLACE]"});
  out->push_back({"TOUCH", -2, kR | kCmdFast, 1, -1, 1, Touch,
                  "Returns the number of existing keys out of those specified after updating the "
                  "time they were last accessed.",
                  "generic", "3.2.1", "key..."});
  // OBJECT's key is argument 2 (OBJECT HELP has none: the range is empty).
  out->push_back({"OBJECT", -2, kR, 2, 2, 1, Object, "OBJECT ENCODING|IDLETIME|FREQ|REFCOUNT key.",
                  "generic", "2.2.3", "", kObjectSubcommands});
  for (size_t i = first; i < out->size(); ++i) (*out)[i].acl_categories |= kAclKeyspace;
}

}  // namespace pion::server
