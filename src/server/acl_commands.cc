// The command part of ACL rules (server/acl.h): whole commands, categories,
// subcommands (+config|get, -config|set, +client|id) and first arguments
// (+select|0), and the names of Redis commands pion does not have, which
// Redis ACL files name (+@all -debug): accepted and kept as written, with no
// effect, so such files load (docs/security.md).
#include <algorithm>
#include <string>
#include <string_view>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/acl.h"
#include "server/commands/command_table.h"

namespace pion::server {

namespace {

// Every Redis 7.0 command (src/commands/*.json, containers without their
// subcommands), lower case, sorted.
constexpr std::string_view kRedisCommands[] = {
    "acl",
    "append",
    "asking",
    "auth",
    "bgrewriteaof",
    "bgsave",
    "bitcount",
    "bitfield",
    "bitfield_ro",
    "bitop",
    "bitpos",
    "blmove",
    "blmpop",
    "blpop",
    "brpop",
    "brpoplpush",
    "bzmpop",
    "bzpopmax",
    "bzpopmin",
    "client",
    "cluster",
    "command",
    "config",
    "copy",
    "dbsize",
    "debug",
    "decr",
    "decrby",
    "del",
    "discard",
    "dump",
    "echo",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "exec",
    "exists",
    "expire",
    "expireat",
    "expiretime",
    "failover",
    "fcall",
    "fcall_ro",
    "flushall",
    "flushdb",
    "function",
    "geoadd",
    "geodist",
    "geohash",
    "geopos",
    "georadius",
    "georadius_ro",
    "georadiusbymember",
    "georadiusbymember_ro",
    "geosearch",
    "geosearchstore",
    "get",
    "getbit",
    "getdel",
    "getex",
    "getrange",
    "getset",
    "hdel",
    "hello",
    "hexists",
    "hget",
    "hgetall",
    "hincrby",
    "hincrbyfloat",
    "hkeys",
    "hlen",
    "hmget",
    "hmset",
    "hrandfield",
    "hscan",
    "hset",
    "hsetnx",
    "hstrlen",
    "hvals",
    "incr",
    "incrby",
    "incrbyfloat",
    "info",
    "keys",
    "lastsave",
    "latency",
    "lcs",
    "lindex",
    "linsert",
    "llen",
    "lmove",
    "lmpop",
    "lolwut",
    "lpop",
    "lpos",
    "lpush",
    "lpushx",
    "lrange",
    "lrem",
    "lset",
    "ltrim",
    "memory",
    "mget",
    "migrate",
    "module",
    "monitor",
    "move",
    "mset",
    "msetnx",
    "multi",
    "object",
    "persist",
    "pexpire",
    "pexpireat",
    "pexpiretime",
    "pfadd",
    "pfcount",
    "pfdebug",
    "pfmerge",
    "pfselftest",
    "ping",
    "psetex",
    "psubscribe",
    "psync",
    "pttl",
    "publish",
    "pubsub",
    "punsubscribe",
    "quit",
    "randomkey",
    "readonly",
    "readwrite",
    "rename",
    "renamenx",
    "replconf",
    "replicaof",
    "reset",
    "restore",
    "restore-asking",
    "role",
    "rpop",
    "rpoplpush",
    "rpush",
    "rpushx",
    "sadd",
    "save",
    "scan",
    "scard",
    "script",
    "sdiff",
    "sdiffstore",
    "select",
    "sentinel",
    "set",
    "setbit",
    "setex",
    "setnx",
    "setrange",
    "shutdown",
    "sinter",
    "sintercard",
    "sinterstore",
    "sismember",
    "slaveof",
    "slowlog",
    "smembers",
    "smismember",
    "smove",
    "sort",
    "sort_ro",
    "spop",
    "spublish",
    "srandmember",
    "srem",
    "sscan",
    "ssubscribe",
    "strlen",
    "subscribe",
    "substr",
    "sunion",
    "sunionstore",
    "sunsubscribe",
    "swapdb",
    "sync",
    "time",
    "touch",
    "ttl",
    "type",
    "unlink",
    "unsubscribe",
    "unwatch",
    "wait",
    "watch",
    "xack",
    "xadd",
    "xautoclaim",
    "xclaim",
    "xdel",
    "xgroup",
    "xinfo",
    "xlen",
    "xpending",
    "xrange",
    "xread",
    "xreadgroup",
    "xrevrange",
    "xsetid",
    "xtrim",
    "zadd",
    "zcard",
    "zcount",
    "zdiff",
    "zdiffstore",
    "zincrby",
    "zinter",
    "zintercard",
    "zinterstore",
    "zlexcount",
    "zmpop",
    "zmscore",
    "zpopmax",
    "zpopmin",
    "zrandmember",
    "zrange",
    "zrangebylex",
    "zrangebyscore",
    "zrangestore",
    "zrank",
    "zrem",
    "zremrangebylex",
    "zremrangebyrank",
    "zremrangebyscore",
    "zrevrange",
    "zrevrangebylex",
    "zrevrangebyscore",
    "zrevrank",
    "zscan",
    "zscore",
    "zunion",
    "zunionstore",
};

// Every subcommand of Redis 7.0's container commands ("container|sub", lower
// case, sorted; src/commands/*-*.json), so that a rule naming one pion lacks
// loads, and one Redis does not know is refused as Redis refuses it.
constexpr std::string_view kRedisSubcommands[] = {
    "acl|cat",
    "acl|deluser",
    "acl|dryrun",
    "acl|genpass",
    "acl|getuser",
    "acl|help",
    "acl|list",
    "acl|load",
    "acl|log",
    "acl|save",
    "acl|setuser",
    "acl|users",
    "acl|whoami",
    "client|caching",
    "client|getname",
    "client|getredir",
    "client|help",
    "client|id",
    "client|info",
    "client|kill",
    "client|list",
    "client|no-evict",
    "client|pause",
    "client|reply",
    "client|setname",
    "client|tracking",
    "client|trackinginfo",
    "client|unblock",
    "client|unpause",
    "cluster|addslots",
    "cluster|addslotsrange",
    "cluster|bumpepoch",
    "cluster|count-failure-reports",
    "cluster|countkeysinslot",
    "cluster|delslots",
    "cluster|delslotsrange",
    "cluster|failover",
    "cluster|flushslots",
    "cluster|forget",
    "cluster|getkeysinslot",
    "cluster|help",
    "cluster|info",
    "cluster|keyslot",
    "cluster|links",
    "cluster|meet",
    "cluster|myid",
    "cluster|nodes",
    "cluster|replicas",
    "cluster|replicate",
    "cluster|reset",
    "cluster|saveconfig",
    "cluster|set-config-epoch",
    "cluster|setslot",
    "cluster|shards",
    "cluster|slaves",
    "cluster|slots",
    "command|count",
    "command|docs",
    "command|getkeys",
    "command|getkeysandflags",
    "command|help",
    "command|info",
    "command|list",
    "config|get",
    "config|help",
    "config|resetstat",
    "config|rewrite",
    "config|set",
    "function|delete",
    "function|dump",
    "function|flush",
    "function|help",
    "function|kill",
    "function|list",
    "function|load",
    "function|restore",
    "function|stats",
    "latency|doctor",
    "latency|graph",
    "latency|help",
    "latency|histogram",
    "latency|history",
    "latency|latest",
    "latency|reset",
    "memory|doctor",
    "memory|help",
    "memory|malloc-stats",
    "memory|purge",
    "memory|stats",
    "memory|usage",
    "module|help",
    "module|list",
    "module|load",
    "module|loadex",
    "module|unload",
    "object|encoding",
    "object|freq",
    "object|help",
    "object|idletime",
    "object|refcount",
    "pubsub|channels",
    "pubsub|help",
    "pubsub|numpat",
    "pubsub|numsub",
    "pubsub|shardchannels",
    "pubsub|shardnumsub",
    "script|debug",
    "script|exists",
    "script|flush",
    "script|help",
    "script|kill",
    "script|load",
    "slowlog|get",
    "slowlog|help",
    "slowlog|len",
    "slowlog|reset",
    "xgroup|create",
    "xgroup|createconsumer",
    "xgroup|delconsumer",
    "xgroup|destroy",
    "xgroup|help",
    "xgroup|setid",
    "xinfo|consumers",
    "xinfo|groups",
    "xinfo|help",
    "xinfo|stream",
};

// Whether `name` ("config|get", any case) is a Redis subcommand.
bool IsRedisSubcommand(std::string_view name) {
  std::string lower = ToLower(name);
  return std::binary_search(std::begin(kRedisSubcommands), std::end(kRedisSubcommands),
                            std::string_view(lower));
}

// Whether Redis's `cmd` is a container command (has subcommands).
bool IsRedisContainer(std::string_view cmd) {
  std::string prefix = ToLower(cmd) + "|";
  auto it = std::lower_bound(std::begin(kRedisSubcommands), std::end(kRedisSubcommands),
                             std::string_view(prefix));
  return it != std::end(kRedisSubcommands) && it->starts_with(prefix);
}

bool IsRedisCommand(std::string_view name) {
  std::string lower = ToLower(name);
  return std::binary_search(std::begin(kRedisCommands), std::end(kRedisCommands),
                            std::string_view(lower));
}

void SetBit(std::vector<uint64_t>* v, size_t i, bool on) {
  if (on)
    (*v)[i / 64] |= uint64_t{1} << (i % 64);
  else
    (*v)[i / 64] &= ~(uint64_t{1} << (i % 64));
}

bool GetBit(const std::vector<uint64_t>& v, size_t i) {
  return i / 64 < v.size() && (v[i / 64] >> (i % 64) & 1);
}

// The command at `index` allowed or denied as a whole: its bit, every
// subcommand's, and no first-argument rule left.
void SetCommand(AclUser* u, const CommandTable& table, size_t index, bool allow) {
  SetBit(&u->allowed, index, allow);
  for (const auto& [sub, slot] : table.subcommands(&table.specs()[index]))
    SetBit(&u->allowed_slots, slot, allow);
  std::erase_if(u->arg_rules, [&](const AclUser::ArgRule& r) { return r.index == index; });
}

// Whether the command at `index` is allowed (`allow`) or denied as a whole:
// its bit, every subcommand's, and no first-argument rule.
bool WhollySet(const AclUser& u, const CommandTable& table, size_t index, bool allow) {
  if (u.CommandAllowed(index) != allow) return false;
  for (const auto& [sub, slot] : table.subcommands(&table.specs()[index]))
    if (GetBit(u.allowed_slots, slot) != allow) return false;
  for (const AclUser::ArgRule& r : u.arg_rules)
    if (r.index == index) return false;
  return true;
}

}  // namespace

void Acl::InitCommandRules(AclUser* u) const {
  u->table = commands_;
  u->allowed.assign((ncommands_ + 63) / 64, 0);
  u->allowed_slots.assign((commands_->num_stat_names() + 63) / 64, 0);
  u->by_sub.assign((ncommands_ + 63) / 64, 0);
  u->arg_rules.clear();
}

void Acl::SetAllCommands(AclUser* u, bool allow) const {
  const uint64_t fill = allow ? ~uint64_t{0} : 0;
  u->allowed.assign(u->allowed.size(), fill);
  u->allowed_slots.assign(u->allowed_slots.size(), fill);
  u->arg_rules.clear();
}

Status Acl::ApplyCommandRule(AclUser* u, std::string_view rule) const {
  auto fail = [&](std::string_view why) {
    return Status::InvalidArgument(AclSetUserError(rule, why));
  };
  const bool allow = rule[0] == '+';
  std::string_view what = rule.substr(1);
  const auto& specs = commands_->specs();
  std::string written = std::string(1, rule[0]) + ToLower(what);
  if (what[0] == '@') {
    uint32_t bit = AclCategoryBit(what.substr(1));
    if (bit == 0) return fail(kErrAclUnknownCommand);
    for (size_t i = 0; i < specs.size(); ++i) {
      if (CommandCategories(specs[i]) & bit) {
        SetCommand(u, *commands_, i, allow);
        continue;
      }
      // A subcommand of a category its command is not in (client|list is
      // @admin, CLIENT is not): that subcommand alone, as Redis.
      for (const auto& [sub, slot] : commands_->subcommands(&specs[i]))
        if (SubcommandCategories(specs[i], sub) & bit) SetBit(&u->allowed_slots, slot, allow);
    }
    u->cmd_rules.push_back(std::move(written));
    return Status::OK();
  }
  size_t bar = what.rfind('|');
  if (bar == std::string_view::npos) {
    const CommandSpec* s = commands_->Find(what);
    if (s == nullptr) {
      if (!IsRedisCommand(what)) return fail(kErrAclUnknownCommand);
      u->cmd_rules.push_back(std::move(written));  // a Redis command pion lacks: no effect
      return Status::OK();
    }
    SetCommand(u, *commands_, static_cast<size_t>(s - specs.data()), allow);
    // As Redis's description: the whole command engulfs the rules given
    // before for its subcommands (+memory|doctor then +memory: "+memory").
    const std::string prefix = ToLower(what) + "|";
    std::erase_if(u->cmd_rules, [&](const std::string& r) {
      return r.size() > prefix.size() + 1 && r.compare(1, prefix.size(), prefix) == 0;
    });
    u->cmd_rules.push_back(std::move(written));
    return Status::OK();
  }
  // cmd|sub: a subcommand, or (a command without subcommands) a first argument.
  std::string_view cmd = what.substr(0, bar), sub = what.substr(bar + 1);
  if (sub.empty() || cmd.empty()) return fail(kErrAclSyntax);
  if (cmd.find('|') != std::string_view::npos) {
    // As Redis: "+a|b|c" with a|b a subcommand asks for a subcommand's first
    // argument; anything else (-a|b|c, get|x|y) names no command at all.
    return fail(allow && IsRedisSubcommand(cmd) ? kErrAclSubcommandFirstArg
                                                : kErrAclUnknownCommand);
  }
  const CommandSpec* s = commands_->Find(cmd);
  std::string upper = ToUpper(sub);
  bool documented = false;
  if (s != nullptr)
    for (const auto& [name, slot] : commands_->subcommands(s)) documented |= name == upper;
  // A container command of Redis takes only subcommands (no first
  // arguments): +config|asdf is refused as Redis refuses it.
  if (!documented && IsRedisContainer(cmd) && !IsRedisSubcommand(what))
    return fail(kErrAclUnknownCommand);
  if (s == nullptr) {
    if (!IsRedisCommand(cmd)) return fail(kErrAclUnknownCommand);
    u->cmd_rules.push_back(std::move(written));  // a Redis command pion lacks: no effect
    return Status::OK();
  }
  const size_t index = static_cast<size_t>(s - specs.data());
  // A rule that changes nothing (+client|id while all of CLIENT is allowed,
  // -config|set while none of CONFIG is) is not kept, as Redis describes it.
  if (WhollySet(*u, *commands_, index, allow)) return Status::OK();
  std::erase_if(u->arg_rules,
                [&](const AclUser::ArgRule& r) { return r.index == index && r.arg == upper; });
  for (const auto& [name, slot] : commands_->subcommands(s))
    if (name == upper) SetBit(&u->allowed_slots, slot, allow);
  // A subcommand pion does not document (or a first argument) is matched by
  // name; one pion lacks altogether then simply never comes.
  if (!documented) u->arg_rules.push_back({index, std::move(upper), allow});
  u->cmd_rules.push_back(std::move(written));
  return Status::OK();
}

void Acl::FinishCommandRules(AclUser* u) const {
  u->by_sub.assign(u->by_sub.size(), 0);
  for (const AclUser::ArgRule& r : u->arg_rules) {
    if (r.allow != u->CommandAllowed(r.index)) SetBit(&u->by_sub, r.index, true);
  }
  const auto& specs = commands_->specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    bool on = u->CommandAllowed(i);
    for (const auto& [sub, slot] : commands_->subcommands(&specs[i]))
      if (GetBit(u->allowed_slots, slot) != on) SetBit(&u->by_sub, i, true);
  }
}

bool AclUser::SubcommandAllowed(size_t index, const CommandSpec& spec,
                                std::span<const std::string_view> args) const {
  if (args.size() >= 2) {
    for (const ArgRule& r : arg_rules)
      if (r.index == index && EqualsIgnoreCase(args[1], r.arg)) return r.allow;
    if (table != nullptr) {
      size_t slot = table->StatIndex(&spec, args);
      if (slot != table->StatIndex(&spec)) return GetBit(allowed_slots, slot);
    }
  }
  return CommandAllowed(index);
}

}  // namespace pion::server
