// Server commands: COMMAND, CONFIG, DBSIZE, FLUSHALL, SHUTDOWN, TIME
// (docs/protocol.md "Server").
#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "net/client_control.h"
#include "net/client_info.h"
#include "server/acl.h"
#include "server/command_env.h"
#include "server/commands/command_docs.h"
#include "server/commands/command_table.h"
#include "server/commands/key_specs.h"
#include "store/key_ops.h"

namespace pion::server {

namespace {

// Key specs (key_specs.h): Redis 7.0's for a Redis command, one derived from
// the (first, last, step) key range otherwise, so that cluster clients that
// read key specs route every keyed command (docs/cluster.md).
void KeySpecFlagsReply(ReplyBuilder* rb, uint32_t flags) {
  std::vector<std::string_view> names = KeySpecFlagNames(flags);
  rb->SetHeader(names.size());
  for (std::string_view n : names) rb->SimpleString(n);
}

void KeySpecsReply(ReplyBuilder* rb, const CommandSpec& s) {
  std::vector<KeySpec> specs = KeySpecsOf(s);
  rb->ArrayHeader(specs.size());
  for (const KeySpec& k : specs) {
    rb->MapHeader(3);
    rb->Bulk("flags");
    KeySpecFlagsReply(rb, k.flags);
    rb->Bulk("begin_search");
    rb->MapHeader(2);
    rb->Bulk("type");
    rb->Bulk("index");
    rb->Bulk("spec");
    rb->MapHeader(1);
    rb->Bulk("index");
    rb->Integer(k.begin);
    rb->Bulk("find_keys");
    rb->MapHeader(2);
    rb->Bulk("type");
    rb->Bulk("range");
    rb->Bulk("spec");
    rb->MapHeader(3);
    rb->Bulk("lastkey");
    rb->Integer(k.lastkey);
    rb->Bulk("keystep");
    rb->Integer(k.step);
    rb->Bulk("limit");
    rb->Integer(0);
  }
}

void CommandInfoReply(ReplyBuilder* rb, const CommandSpec& s) {
  rb->ArrayHeader(10);
  rb->Bulk(ToLower(s.name));
  rb->Integer(s.arity);
  static const std::pair<uint32_t, const char*> kFlags[] = {
      {kCmdWrite, "write"}, {kCmdReadonly, "readonly"}, {kCmdDenyOom, "denyoom"},
      {kCmdAdmin, "admin"}, {kCmdNoAuth, "no_auth"},    {kCmdLoading, "loading"},
      {kCmdStale, "stale"}, {kCmdFast, "fast"},
  };
  size_t nflags = 0;
  for (auto& [bit, name] : kFlags)
    if (s.flags & bit) ++nflags;
  rb->SetHeader(nflags);
  for (auto& [bit, name] : kFlags)
    if (s.flags & bit) rb->SimpleString(name);
  rb->Integer(s.first_key);
  rb->Integer(s.last_key);
  rb->Integer(s.key_step);
  // ACL categories.
  uint32_t cats = CommandCategories(s);
  auto names = AclCategoryNames();
  rb->SetHeader(static_cast<size_t>(__builtin_popcount(cats)));
  for (size_t i = 0; i < names.size(); ++i)
    if (cats & (1u << i)) rb->SimpleString(std::string("@") + names[i]);
  rb->ArrayHeader(0);  // tips
  KeySpecsReply(rb, s);
  rb->ArrayHeader(0);  // subcommands
}

// One argument of COMMAND DOCS (Redis 7 shape).
void DocArgReply(ReplyBuilder* rb, const DocArg& a) {
  size_t fields = 2;  // name, type
  bool is_key = a.type == "key";
  bool display = a.type != "pure-token" && a.type != "block" && a.type != "oneof";
  fields += display ? 1 : 0;
  fields += is_key ? 1 : 0;
  fields += a.token.empty() ? 0 : 1;
  fields += (a.optional || a.multiple) ? 1 : 0;
  fields += a.args.empty() ? 0 : 1;
  rb->MapHeader(fields);
  rb->Bulk("name");
  rb->Bulk(a.name);
  rb->Bulk("type");
  rb->Bulk(a.type);
  if (display) {
    rb->Bulk("display_text");
    rb->Bulk(a.name);
  }
  if (is_key) {
    rb->Bulk("key_spec_index");
    rb->Integer(0);
  }
  if (!a.token.empty()) {
    rb->Bulk("token");
    rb->Bulk(a.token);
  }
  if (a.optional || a.multiple) {
    rb->Bulk("flags");
    rb->SetHeader((a.optional ? 1 : 0) + (a.multiple ? 1 : 0));
    if (a.optional) rb->SimpleString("optional");
    if (a.multiple) rb->SimpleString("multiple");
  }
  if (!a.args.empty()) {
    rb->Bulk("arguments");
    rb->ArrayHeader(a.args.size());
    for (const DocArg& c : a.args) DocArgReply(rb, c);
  }
}

// The body of one COMMAND DOCS entry (without its name), from its row. A row
// left without COMMAND DOCS fields (none in AllCommands()) reads as group
// "server", since "0.1.0", no arguments.
void DocBodyReply(ReplyBuilder* rb, const char* summary, const char* since, const char* syntax,
                  const char* group,
                  const std::vector<std::pair<std::string, const SubcommandDoc*>>* subs) {
  std::vector<DocArg> args;
  if (syntax != nullptr) args = ParseDocSyntax(syntax);
  size_t fields = 3 + (args.empty() ? 0 : 1) + (subs != nullptr && !subs->empty() ? 1 : 0);
  rb->MapHeader(fields);
  rb->Bulk("summary");
  rb->Bulk(summary != nullptr ? summary : "");
  rb->Bulk("since");
  rb->Bulk(since != nullptr ? since : "0.1.0");
  rb->Bulk("group");
  rb->Bulk(group);
  if (!args.empty()) {
    rb->Bulk("arguments");
    rb->ArrayHeader(args.size());
    for (const DocArg& a : args) DocArgReply(rb, a);
  }
  if (subs != nullptr && !subs->empty()) {
    rb->Bulk("subcommands");
    rb->MapHeader(subs->size());
    for (const auto& [name, d] : *subs) {
      rb->Bulk(name);
      DocBodyReply(rb, d->summary, d->since, d->syntax, group, nullptr);
    }
  }
}

void CommandDocsReply(ReplyBuilder* rb, const CommandTable& table, const CommandSpec& s) {
  rb->Bulk(ToLower(s.name));
  // The table gives each of the row's subcommands, in the row's order, its
  // statistics name ("client|list").
  const auto& slots = table.subcommands(&s);
  std::vector<std::pair<std::string, const SubcommandDoc*>> subs;
  for (size_t i = 0; i < s.subcommands.size() && i < slots.size(); ++i)
    subs.emplace_back(table.stat_name(slots[i].second), &s.subcommands[i]);
  DocBodyReply(rb, s.summary, s.since, s.syntax, s.group != nullptr ? s.group : "server", &subs);
}

// The key argument indexes of a command line by its spec (COMMAND GETKEYS).
bool KeysOf(const CommandTable& table, std::span<const std::string_view> cmd,
            std::vector<int>* keys, const CommandSpec** spec, std::string_view* err) {
  const CommandSpec* s = table.Find(cmd[0]);
  if (s == nullptr) {
    *err = kErrInvalidCommand;
    return false;
  }
  int argc = static_cast<int>(cmd.size());
  if ((s->arity > 0 && s->arity != argc) || (s->arity < 0 && argc < -s->arity)) {
    *err = kErrInvalidArgCount;
    return false;
  }
  if (s->first_key <= 0) {
    *err = kErrNoKeyArguments;
    return false;
  }
  CommandKeyIndexes(*s, cmd, keys);  // first/last/step, or MATCH's numkeys, CHAIN's pairs
  *spec = s;
  return true;
}

void CommandGetKeys(CommandContext& ctx, bool flags) {
  std::vector<int> keys;
  const CommandSpec* spec = nullptr;
  std::string_view err;
  std::span<const std::string_view> cmd = ctx.args.subspan(2);
  if (!KeysOf(ctx.env->commands(), cmd, &keys, &spec, &err)) {
    ctx.reply->Error(err);
    return;
  }
  ctx.reply->ArrayHeader(keys.size());
  for (int k : keys) {
    if (!flags) {
      ctx.reply->Bulk(cmd[k]);
      continue;
    }
    ctx.reply->ArrayHeader(2);
    ctx.reply->Bulk(cmd[k]);
    KeySpecFlagsReply(ctx.reply, KeyFlagsAt(*spec, cmd, k));
  }
}

void CommandList(CommandContext& ctx) {
  const CommandTable& table = ctx.env->commands();
  std::string_view by, value;
  if (ctx.args.size() != 2) {
    if (ctx.args.size() != 5 || !EqualsIgnoreCase(ctx.args[2], "FILTERBY")) {
      ctx.reply->Error(kErrSyntaxError);
      return;
    }
    by = ctx.args[3];
    value = ctx.args[4];
    if (!EqualsIgnoreCase(by, "MODULE") && !EqualsIgnoreCase(by, "ACLCAT") &&
        !EqualsIgnoreCase(by, "PATTERN")) {
      ctx.reply->Error(kErrSyntaxError);
      return;
    }
  }
  std::vector<std::string> names;
  for (const CommandSpec& s : table.specs()) {
    if (EqualsIgnoreCase(by, "MODULE")) break;  // pion has no modules
    bool cat_ok = true;
    if (EqualsIgnoreCase(by, "ACLCAT")) {
      uint32_t bit = AclCategoryBit(value);
      cat_ok = bit != 0 && (CommandCategories(s) & bit) != 0;
    }
    auto add = [&](const std::string& n) {
      if (!cat_ok) return;
      if (EqualsIgnoreCase(by, "PATTERN") && !GlobMatch(value, n, true)) return;
      names.push_back(n);
    };
    add(table.stat_name(table.StatIndex(&s)));
    for (const auto& [sub, slot] : table.subcommands(&s)) add(table.stat_name(slot));
  }
  ctx.reply->ArrayHeader(names.size());
  for (const std::string& n : names) ctx.reply->Bulk(n);
}

void Command(CommandContext& ctx) {
  const CommandTable& table = ctx.env->commands();
  ReplyBuilder* rb = ctx.reply;
  if (ctx.args.size() == 1) {
    rb->ArrayHeader(table.specs().size());
    for (const CommandSpec& s : table.specs()) CommandInfoReply(rb, s);
    return;
  }
  std::string_view sub = ctx.args[1];
  if (EqualsIgnoreCase(sub, "COUNT")) {
    if (ctx.args.size() != 2) {
      rb->Error(WrongArity("command|count"));
      return;
    }
    rb->Integer(static_cast<int64_t>(table.specs().size()));
  } else if (EqualsIgnoreCase(sub, "INFO")) {
    if (ctx.args.size() == 2) {
      rb->ArrayHeader(table.specs().size());
      for (const CommandSpec& s : table.specs()) CommandInfoReply(rb, s);
      return;
    }
    rb->ArrayHeader(ctx.args.size() - 2);
    for (size_t i = 2; i < ctx.args.size(); ++i) {
      const CommandSpec* s = table.Find(ctx.args[i]);
      if (s == nullptr)
        rb->NullArray();
      else
        CommandInfoReply(rb, *s);
    }
  } else if (EqualsIgnoreCase(sub, "DOCS")) {
    std::vector<const CommandSpec*> pick;
    if (ctx.args.size() == 2) {
      for (const CommandSpec& s : table.specs()) pick.push_back(&s);
    } else {
      for (size_t i = 2; i < ctx.args.size(); ++i)
        if (const CommandSpec* s = table.Find(ctx.args[i])) pick.push_back(s);
    }
    rb->MapHeader(pick.size());
    for (const CommandSpec* s : pick) CommandDocsReply(rb, table, *s);
  } else if (EqualsIgnoreCase(sub, "LIST")) {
    CommandList(ctx);
  } else if (EqualsIgnoreCase(sub, "GETKEYS") || EqualsIgnoreCase(sub, "GETKEYSANDFLAGS")) {
    if (ctx.args.size() < 3) {
      rb->Error(WrongArity("command|" + ToLower(sub)));
      return;
    }
    CommandGetKeys(ctx, EqualsIgnoreCase(sub, "GETKEYSANDFLAGS"));
  } else if (EqualsIgnoreCase(sub, "HELP")) {
    static const char* kLines[] = {
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all commands.",
        "COUNT",
        "    Return the total number of commands.",
        "INFO [<command-name> ...]",
        "    Return details about the given (or all) commands.",
        "DOCS [<command-name> ...]",
        "    Return documentation of the given (or all) commands.",
        "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
        "    Return the names of all commands, or those matching the filter.",
        "GETKEYS <full-command>",
        "    Return the keys from a full command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and their access flags from a full command.",
        "HELP",
        "    Print this help.",
    };
    rb->ArrayHeader(std::size(kLines));
    for (const char* l : kLines) rb->SimpleString(l);
  } else {
    rb->Error(UnknownSubcommandError("COMMAND", sub));
  }
}

// Read-only names some clients ask for (redis-benchmark asks for save and
// appendonly), answered with what pion does.
const std::pair<const char*, const char*> kCompatConfig[] = {
    {"appendonly", "no"},
    {"databases", "1"},
    // No replication: Redis answers an empty value under the name and its alias.
    {"replicaof", ""},
    {"slaveof", ""},
};

void ConfigGet(CommandContext& ctx) {
  Config cfg = ctx.env->control().ConfigSnapshot();
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    std::string_view pat = ctx.args[i];
    for (const ConfigOption& o : ConfigOptions()) {
      // A hidden setting answers only to its exact name (as Redis).
      bool match = o.hidden ? EqualsIgnoreCase(pat, o.name) : GlobMatch(pat, o.name, true);
      if (match && seen.insert(o.name).second) out.emplace_back(o.name, o.get(cfg));
    }
    for (auto& [name, value] : kCompatConfig) {
      if (GlobMatch(pat, name, true) && seen.insert(name).second) out.emplace_back(name, value);
    }
  }
  ctx.reply->MapHeader(out.size());
  for (auto& [k, v] : out) {
    ctx.reply->Bulk(k);
    ctx.reply->Bulk(v);
  }
}

void ConfigSet(CommandContext& ctx) {
  if (ctx.args.size() < 4 || ctx.args.size() % 2 != 0) {
    ctx.reply->Error(WrongArity("config|set"));
    return;
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t i = 2; i < ctx.args.size(); i += 2)
    pairs.emplace_back(ToLower(ctx.args[i]), std::string(ctx.args[i + 1]));
  uint64_t lsn = 0;
  Status st = ctx.env->control().SetConfig(pairs, &lsn);
  ctx.wait_lsn = lsn;
  if (!st.ok()) {
    if (st.code() == Code::kInvalidArgument)
      ctx.reply->Error(st.message());
    else
      ctx.reply->Error(StatusToError(st));
    return;
  }
  ctx.reply->SimpleString("OK");
}

void ConfigCmd(CommandContext& ctx) {
  std::string_view sub = ctx.args[1];
  if (EqualsIgnoreCase(sub, "GET")) {
    if (ctx.args.size() < 3) {
      ctx.reply->Error(WrongArity("config|get"));
      return;
    }
    ConfigGet(ctx);
  } else if (EqualsIgnoreCase(sub, "SET")) {
    ConfigSet(ctx);
  } else if (EqualsIgnoreCase(sub, "RESETSTAT")) {
    if (ctx.args.size() != 2) {
      ctx.reply->Error(WrongArity("config|resetstat"));
      return;
    }
    ctx.env->control().ResetStats();
    ctx.reply->SimpleString("OK");
  } else if (EqualsIgnoreCase(sub, "REWRITE")) {
    ctx.reply->Error(kErrConfigRewrite);
  } else if (EqualsIgnoreCase(sub, "HELP")) {
    static const char* kLines[] = {
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern> [<pattern> ...]",
        "    Return parameters matching the glob-like patterns.",
        "SET <directive> <value> [<directive> <value> ...]",
        "    Set run-time parameters: maxmemory, appendfsync, loglevel, timeout, maxclients,",
        "    client-output-buffer-limit.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "HELP",
        "    Print this help.",
    };
    ctx.reply->ArrayHeader(std::size(kLines));
    for (const char* l : kLines) ctx.reply->SimpleString(l);
  } else {
    ctx.reply->Error(UnknownSubcommandError("CONFIG", sub));
  }
}

void DbSize(CommandContext& ctx) {
  store::Store* st = ctx.env->store();
  const AclUser* u = ctx.env->ClientUser(ctx.client);
  if (st == nullptr) {
    ctx.reply->Integer(0);
  } else if (u != nullptr && u->allkeys) {
    ctx.reply->Integer(static_cast<int64_t>(st->DbSize()));
  } else {
    // A user with key patterns counts only the keys (string keys, namespaces) it may read.
    auto names = AclVisibleKeys(u, store::OpKeys({*st}, "*"), kAclPermRead);
    ctx.reply->Integer(static_cast<int64_t>(names.size()));
  }
}

void FlushAll(CommandContext& ctx) {
  if (ctx.args.size() > 2 || (ctx.args.size() == 2 && !EqualsIgnoreCase(ctx.args[1], "ASYNC") &&
                              !EqualsIgnoreCase(ctx.args[1], "SYNC"))) {
    ctx.reply->Error(kErrSyntaxError);
    return;
  }
  if (store::Store* st = ctx.env->store()) {
    uint64_t lsn = 0;
    const AclUser* u = ctx.env->ClientUser(ctx.client);
    Status s;
    if (u != nullptr && u->allkeys) {
      s = st->FlushAll(&lsn);
    } else {
      // A user with key patterns flushes only the keys (namespaces and string
      // keys) it may write, each deletion logged as a DEL would be. A namespace
      // goes with its subtree, so one with a descendant the user may not write
      // stays, as DEL of it would be refused.
      auto names = AclVisibleKeys(u, store::OpKeys({*st}, "*"), kAclPermWrite);
      std::function<bool(std::string_view)> may_drop = SubtreeWriteCheck(u, nullptr);
      for (const std::string& name : names) {
        std::string_view one[] = {name};
        uint64_t one_lsn = 0;
        auto n = store::OpDelete({*st, &one_lsn}, one, may_drop);
        if (!n.ok() && n.status().reason<store::Reason>() != store::Reason::kDropRefused) {
          s = n.status();
          break;
        }
        lsn = std::max(lsn, one_lsn);
      }
    }
    if (!s.ok()) {
      ctx.reply->Error(StatusToError(s));
      return;
    }
    ctx.wait_lsn = lsn;
    // With save points set, FLUSHALL snapshots the emptied data set at once
    // (Redis saves then too): rdb_changes_since_last_save reads 0 after it.
    ctx.env->saves().SaveAfterFlushAll();
  }
  ctx.reply->SimpleString("OK");
  // Every tracking client is told that everything it cached is gone (after
  // this reply: the push goes through the worker's mailbox).
  ctx.env->tracking().InvalidateAll();
}

void Shutdown(CommandContext& ctx) {
  bool save = false, nosave = false, force = false;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    std::string_view a = ctx.args[i];
    if (EqualsIgnoreCase(a, "SAVE")) {
      save = true;
    } else if (EqualsIgnoreCase(a, "NOSAVE")) {
      nosave = true;
    } else if (EqualsIgnoreCase(a, "NOW")) {
      // Nothing to wait for: pion has no replicas.
    } else if (EqualsIgnoreCase(a, "FORCE")) {
      force = true;
    } else if (EqualsIgnoreCase(a, "ABORT")) {
      ctx.reply->Error(kErrNoShutdownInProgress);
      return;
    } else {
      ctx.reply->Error(kErrSyntaxError);
      return;
    }
  }
  if (save && nosave) {
    ctx.reply->Error(kErrSyntaxError);
    return;
  }
  if (save) {
    Status st = ctx.env->saves().SaveForShutdown();
    if (!st.ok()) {
      LOG_WARNING("SHUTDOWN SAVE failed: %s", st.ToString().c_str());
      if (!force) {
        ctx.reply->Error(kErrShutdownFailed);
        return;
      }
    }
  }
  LOG_NOTICE("SHUTDOWN requested by client id=%llu addr=%s",
             static_cast<unsigned long long>(ctx.client->id), ctx.client->addr.c_str());
  // As Redis: no reply; the connection is closed by the shutdown.
  ctx.client->control->StopReading();
  ctx.env->control().RequestShutdown();
}

void Time(CommandContext& ctx) {
  uint64_t us = UnixMicros();
  ctx.reply->ArrayHeader(2);
  ctx.reply->Bulk(std::to_string(us / 1000000));
  ctx.reply->Bulk(std::to_string(us % 1000000));
}

}  // namespace

// COMMAND's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kCommandSubcommands[] = {
    {"COUNT", "2.8.13", "", "Returns a count of commands."},
    {"INFO", "2.8.13", "[command-name...]", "Returns information about commands."},
    {"DOCS", "7.0.0", "[command-name...]", "Returns documentary information about commands."},
    {"LIST", "7.0.0", "[FILTERBY MODULE module-name | ACLCAT category | PATTERN pattern]",
     "Returns a list of command names."},
    {"GETKEYS", "2.8.13", "command [arg...]", "Extracts the key names from an arbitrary command."},
    {"GETKEYSANDFLAGS", "7.0.0", "command [arg...]",
     "Extracts the key names and access flags from an arbitrary command."},
    {"HELP", "5.0.0", "", "Returns helpful text about the subcommands."},
};

// CONFIG's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kConfigSubcommands[] = {
    {"GET", "2.0.0", "parameter...", "Returns the effective values of settings."},
    {"SET", "2.0.0", "parameter value [parameter value ...]", "Sets settings at run time."},
    {"RESETSTAT", "2.0.0", "", "Resets the server's statistics."},
    {"REWRITE", "2.8.0", "", "Not supported by pion."},
    {"HELP", "5.0.0", "", "Returns helpful text about the subcommands."},
};

void AddAdminCommands(std::vector<CommandSpec>* out) {
  size_t first = out->size();
  out->push_back({"COMMAND", -1, kCmdLoading | kCmdStale, 0, 0, 0, Command,
                  "Command table introspection: COUNT, INFO, DOCS, LIST, GETKEYS.", "server",
                  "2.8.13", "", kCommandSubcommands});
  out->push_back({"CONFIG", -2, kCmdAdmin | kCmdLoading | kCmdStale, 0, 0, 0, ConfigCmd,
                  "CONFIG GET <pattern>, CONFIG SET <name> <value>, CONFIG RESETSTAT.", "server",
                  "2.0.0", "", kConfigSubcommands});
  out->push_back({"DBSIZE", 1, kCmdReadonly | kCmdFast, 0, 0, 0, DbSize,
                  "Number of keys: string keys and namespaces.", "server", "1.0.0", ""});
  out->push_back({"FLUSHALL", -1, kCmdWrite, 0, 0, 0, FlushAll,
                  "Drops every namespace, session and string key (logged).", "server", "1.0.0",
                  "[ASYNC | SYNC]"});
  out->push_back({"FLUSHDB", -1, kCmdWrite, 0, 0, 0, FlushAll,
                  "FLUSHALL (database 0 is the only one).", "server", "1.0.0", "[ASYNC | SYNC]"});
  out->push_back({"SHUTDOWN", -1, kCmdAdmin | kCmdLoading | kCmdStale | kCmdNoMulti, 0, 0, 0,
                  Shutdown, "Stops the server gracefully: SHUTDOWN [SAVE|NOSAVE] [NOW] [FORCE].",
                  "server", "1.0.0", "[NOSAVE | SAVE] [NOW] [FORCE] [ABORT]"});
  out->push_back({"TIME", 1, kCmdFast | kCmdLoading | kCmdStale, 0, 0, 0, Time,
                  "Server time: [unix seconds, microseconds].", "server", "2.6.0", ""});
  for (size_t i = first; i < out->size(); ++i) {
    CommandSpec& s = (*out)[i];
    std::string_view n = s.name;
    if (n == "COMMAND") s.acl_categories |= kAclConnection;
    if (n == "DBSIZE") s.acl_categories |= kAclKeyspace;
    if (n == "FLUSHALL" || n == "FLUSHDB") s.acl_categories |= kAclKeyspace | kAclDangerous;
  }
}

}  // namespace pion::server
