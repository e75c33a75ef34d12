// Server commands: COMMAND, CONFIG, DBSIZE, FLUSHALL, SHUTDOWN, TIME
// (docs/protocol.md "Server").
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/strutil.h"
#include "net/client_info.h"
#include "net/connection.h"
#include "server/commands/command_table.h"
#include "server/commands/dispatch.h"
#include "server/commands/errors.h"
#include "server/server.h"

namespace pion::server {

namespace {

const char* CommandGroup(const CommandSpec& s) {
  std::string_view n = s.name;
  if (n.starts_with("KV.") || n.starts_with("V.") || n.starts_with("PION.") ||
      n.starts_with("ATTEND."))
    return "pion";
  if (n == "PING" || n == "ECHO" || n == "HELLO" || n == "AUTH" || n == "SELECT" || n == "QUIT" ||
      n == "RESET" || n == "CLIENT")
    return "connection";
  return "server";
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
  const char* group = CommandGroup(s);
  bool admin = s.flags & kCmdAdmin;
  rb->SetHeader(admin ? 2 : 1);
  rb->SimpleString(std::string("@") + (std::string_view(group) == "pion" ? "pion" : group));
  if (admin) rb->SimpleString("@admin");
  rb->ArrayHeader(0);  // tips
  rb->ArrayHeader(0);  // key specs
  rb->ArrayHeader(0);  // subcommands
}

void CommandDocsReply(ReplyBuilder* rb, const CommandSpec& s) {
  rb->Bulk(ToLower(s.name));
  rb->MapHeader(3);
  rb->Bulk("summary");
  rb->Bulk(s.summary != nullptr ? s.summary : "");
  rb->Bulk("since");
  rb->Bulk("0.1.0");
  rb->Bulk("group");
  rb->Bulk(CommandGroup(s));
}

void Command(CommandContext& ctx) {
  const CommandTable& table = ctx.server->commands();
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
    for (const CommandSpec* s : pick) CommandDocsReply(rb, *s);
  } else if (EqualsIgnoreCase(sub, "LIST")) {
    rb->ArrayHeader(table.specs().size());
    for (const CommandSpec& s : table.specs()) rb->Bulk(ToLower(s.name));
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
        "LIST",
        "    Return the names of all commands.",
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
    {"save", ""},
    {"appendonly", "no"},
    {"databases", "1"},
};

void ConfigGet(CommandContext& ctx) {
  Config cfg = ctx.server->ConfigSnapshot();
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    std::string_view pat = ctx.args[i];
    for (const ConfigOption& o : ConfigOptions()) {
      if (GlobMatch(pat, o.name, true) && seen.insert(o.name).second)
        out.emplace_back(o.name, o.get(cfg));
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
  Status st = ctx.server->SetConfig(pairs, &lsn);
  ctx.wait_lsn = lsn;
  if (!st.ok()) {
    if (st.code() == Code::kInvalidArgument)
      ctx.reply->Error(st.message());
    else
      ctx.reply->Error(st);
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
    ctx.server->ResetStats();
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
  store::Store* st = ctx.server->store();
  ctx.reply->Integer(st != nullptr ? static_cast<int64_t>(st->DbSize()) : 0);
}

void FlushAll(CommandContext& ctx) {
  if (ctx.args.size() > 2 || (ctx.args.size() == 2 && !EqualsIgnoreCase(ctx.args[1], "ASYNC") &&
                              !EqualsIgnoreCase(ctx.args[1], "SYNC"))) {
    ctx.reply->Error(kErrSyntaxError);
    return;
  }
  if (store::Store* st = ctx.server->store()) {
    uint64_t lsn = 0;
    Status s = st->FlushAll(&lsn);
    if (!s.ok()) {
      ctx.reply->Error(s);
      return;
    }
    ctx.wait_lsn = lsn;
  }
  ctx.reply->SimpleString("OK");
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
    Status st = ctx.server->SaveForShutdown();
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
  ctx.server->RequestShutdown();
}

void Time(CommandContext& ctx) {
  uint64_t us = UnixMicros();
  ctx.reply->ArrayHeader(2);
  ctx.reply->Bulk(std::to_string(us / 1000000));
  ctx.reply->Bulk(std::to_string(us % 1000000));
}

}  // namespace

void AddAdminCommands(std::vector<CommandSpec>* out) {
  out->push_back({"COMMAND", -1, kCmdLoading | kCmdStale, 0, 0, 0, Command,
                  "Command table introspection: COUNT, INFO, DOCS, LIST."});
  out->push_back({"CONFIG", -2, kCmdAdmin | kCmdLoading | kCmdStale, 0, 0, 0, ConfigCmd,
                  "CONFIG GET <pattern>, CONFIG SET <name> <value>, CONFIG RESETSTAT."});
  out->push_back(
      {"DBSIZE", 1, kCmdReadonly | kCmdFast, 0, 0, 0, DbSize, "Number of keys: string keys and namespaces."});
  out->push_back({"FLUSHALL", -1, kCmdWrite, 0, 0, 0, FlushAll,
                  "Drops every namespace, session and string key (logged)."});
  out->push_back({"FLUSHDB", -1, kCmdWrite, 0, 0, 0, FlushAll,
                  "FLUSHALL (database 0 is the only one)."});
  out->push_back({"SHUTDOWN", -1, kCmdAdmin | kCmdLoading | kCmdStale | kCmdNoMulti, 0, 0, 0,
                  Shutdown,
                  "Stops the server gracefully: SHUTDOWN [SAVE|NOSAVE] [NOW] [FORCE]."});
  out->push_back({"TIME", 1, kCmdFast | kCmdLoading | kCmdStale, 0, 0, 0, Time,
                  "Server time: [unix seconds, microseconds]."});
}

}  // namespace pion::server
