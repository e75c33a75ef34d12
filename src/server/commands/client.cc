// CLIENT ID|SETNAME|GETNAME|INFO|LIST|KILL|NO-EVICT|NO-TOUCH|SETINFO|REPLY|UNBLOCK|
// PAUSE|UNPAUSE|HELP; TRACKING|CACHING|GETREDIR|TRACKINGINFO in client_tracking.cc.
// LIST and KILL see every worker's clients through the server's registry; a
// client on another worker is closed by a task posted to that worker's loop.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "net/client_control.h"
#include "net/client_info.h"
#include "server/acl.h"
#include "server/command_env.h"
#include "server/commands/client_tracking.h"
#include "server/commands/command_table.h"

namespace pion::server {

namespace {

bool ValidName(std::string_view name) {
  for (char c : name)
    if (c < '!' || c > '~') return false;
  return true;
}

// CLIENT LIST flags: O (MONITOR), P (Pub/Sub), t (CLIENT TRACKING), R (its
// redirect is gone), B (BCAST), e (NO-EVICT), else N; in Redis's order.
std::string ClientFlags(const ClientInfo& c) {
  constexpr auto kR = std::memory_order_relaxed;
  std::string f;
  if (c.monitor.load(kR))
    f += 'O';
  else if (c.pubsub.load(kR))
    f += 'P';
  uint32_t t = c.tracking.load(kR);
  if (t & kTrackOn) f += 't';
  if (t & kTrackBrokenRedir) f += 'R';
  if (t & kTrackBcast) f += 'B';
  if (c.no_evict.load(kR)) f += 'e';
  return f.empty() ? "N" : f;
}

}  // namespace

// One CLIENT LIST line (Redis 7 field order; fields pion does not have are
// reported as Redis reports them for an idle normal client). Registry locked.
void AppendClientLine(const ClientInfo& c, std::string* out, uint64_t running_bytes) {
  uint64_t now = MonotonicUs();
  constexpr auto kR = std::memory_order_relaxed;
  uint64_t last = c.last_active_us.load(kR);
  const char* cmd = c.last_cmd.load(kR);  // lower case already ("client|list")
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "id=%llu addr=%s laddr=%s fd=%d name=", static_cast<unsigned long long>(c.id),
                c.addr.c_str(), c.laddr.c_str(), c.fd);
  out->append(buf);
  out->append(c.name);
  uint64_t qbuf = c.qbuf.load(kR) + running_bytes, qfree = c.qbuf_free.load(kR);
  uint64_t omem = c.omem.load(kR), tot = c.tot_mem.load(kR) + running_bytes;
  std::snprintf(
      buf, sizeof(buf),
      " age=%llu idle=%llu flags=%s db=0 sub=%u psub=%u ssub=%u multi=%lld qbuf=%llu "
      "qbuf-free=%llu argv-mem=0 multi-mem=%llu rbs=0 rbp=0 obl=0 oll=0 omem=%llu "
      "tot-mem=%llu events=r cmd=%s user=%s redir=%lld resp=%d lib-name=",
      static_cast<unsigned long long>((now - c.created_us) / 1000000),
      static_cast<unsigned long long>(now > last ? (now - last) / 1000000 : 0),
      ClientFlags(c).c_str(), c.sub.load(kR), c.psub.load(kR), c.ssub.load(kR),
      static_cast<long long>(c.multi.load(kR)), static_cast<unsigned long long>(qbuf),
      static_cast<unsigned long long>(qfree), static_cast<unsigned long long>(c.multi_mem.load(kR)),
      static_cast<unsigned long long>(omem), static_cast<unsigned long long>(tot), cmd,
      c.user.c_str(),
      c.tracking.load(kR) & kTrackOn ? static_cast<long long>(c.tracking_redir.load(kR)) : -1LL,
      c.proto.load(kR));
  out->append(buf);
  out->append(c.lib_name);
  out->append(" lib-ver=");
  out->append(c.lib_ver);
  std::snprintf(buf, sizeof(buf), " worker=%d\n", c.worker);
  out->append(buf);
}

namespace {

size_t DecimalDigits(size_t n) {
  size_t d = 1;
  while (n >= 10) n /= 10, ++d;
  return d;
}

// The running command's size as a RESP array of bulk strings (what Redis's
// query buffer holds while it runs).
uint64_t RunningBytes(const CommandContext& ctx) {
  uint64_t n = 1 + DecimalDigits(ctx.args.size()) + 2;
  for (std::string_view a : ctx.args) n += 1 + DecimalDigits(a.size()) + 2 + a.size() + 2;
  return n;
}

void ClientList(CommandContext& ctx) {
  std::vector<uint64_t> ids;
  bool filter_ids = false;
  int type = -1;  // TYPE filter: -1 any, 0 normal, 1 pubsub (a subscribed client)
  for (size_t i = 2; i < ctx.args.size(); i += 2) {
    if (i + 1 >= ctx.args.size()) {
      ctx.reply->Error(kErrSyntaxError);
      return;
    }
    if (EqualsIgnoreCase(ctx.args[i], "TYPE")) {
      std::string_view t = ctx.args[i + 1];
      if (EqualsIgnoreCase(t, "normal") || EqualsIgnoreCase(t, "pubsub")) {
        type = EqualsIgnoreCase(t, "pubsub") ? 1 : 0;
        continue;
      }
      if (EqualsIgnoreCase(t, "master") || EqualsIgnoreCase(t, "replica") ||
          EqualsIgnoreCase(t, "slave")) {
        ctx.reply->Bulk("");
        return;
      }
      ctx.reply->Error(UnknownClientTypeError(t));
      return;
    }
    if (EqualsIgnoreCase(ctx.args[i], "ID")) {
      filter_ids = true;
      for (size_t j = i + 1; j < ctx.args.size(); ++j) {
        auto id = ParseInt64Strict(ctx.args[j]);
        if (!id.has_value() || *id <= 0) {
          ctx.reply->Error(kErrInvalidClientId);
          return;
        }
        ids.push_back(static_cast<uint64_t>(*id));
      }
      break;
    }
    ctx.reply->Error(kErrSyntaxError);
    return;
  }
  std::string out;
  ctx.env->clients().ForEach([&](const ClientInfo& c) {
    if (filter_ids && std::find(ids.begin(), ids.end(), c.id) == ids.end()) return;
    if (type >= 0 && c.pubsub.load(std::memory_order_relaxed) != (type == 1)) return;
    AppendClientLine(c, &out, c.id == ctx.client->id ? RunningBytes(ctx) : 0);
  });
  // Redis lists clients by id.
  std::vector<std::string_view> lines;
  for (size_t p = 0; p < out.size();) {
    size_t e = out.find('\n', p);
    lines.emplace_back(out.data() + p, e + 1 - p);
    p = e + 1;
  }
  auto id_of = [](std::string_view l) { return std::strtoull(l.data() + 3, nullptr, 10); };
  std::sort(lines.begin(), lines.end(),
            [&](std::string_view a, std::string_view b) { return id_of(a) < id_of(b); });
  std::string sorted;
  sorted.reserve(out.size());
  for (auto l : lines) sorted.append(l);
  ctx.reply->Verbatim(sorted);
}

void ClientInfoCmd(CommandContext& ctx) {
  std::string out;
  ctx.env->clients().ForEach([&](const ClientInfo& c) {
    if (c.id == ctx.client->id) AppendClientLine(c, &out, RunningBytes(ctx));
  });
  ctx.reply->Verbatim(out);
}

struct KillFilter {
  bool has_id = false;
  uint64_t id = 0;
  std::string addr, laddr, user;
  bool skipme = true;
  bool has_maxage = false;
  uint64_t maxage = 0;
  bool type_matches_none = false;
  int type = -1;  // -1 any, 0 normal, 1 pubsub
};

void ClientKill(CommandContext& ctx) {
  KillFilter f;
  bool old_style = ctx.args.size() == 3;
  if (old_style) {
    f.addr = std::string(ctx.args[2]);
    f.skipme = false;
  } else {
    if ((ctx.args.size() - 2) % 2 != 0) {
      ctx.reply->Error(kErrSyntaxError);
      return;
    }
    for (size_t i = 2; i < ctx.args.size(); i += 2) {
      std::string_view k = ctx.args[i], v = ctx.args[i + 1];
      if (EqualsIgnoreCase(k, "ID")) {
        auto id = ParseInt64Strict(v);
        if (!id.has_value() || *id <= 0) {
          ctx.reply->Error(kErrClientIdNotPositive);
          return;
        }
        f.has_id = true;
        f.id = static_cast<uint64_t>(*id);
      } else if (EqualsIgnoreCase(k, "ADDR")) {
        f.addr = std::string(v);
      } else if (EqualsIgnoreCase(k, "LADDR")) {
        f.laddr = std::string(v);
      } else if (EqualsIgnoreCase(k, "USER")) {
        if (ctx.env->acl().Find(v) == nullptr) {
          ctx.reply->Error(NoSuchUserError(v));  // as Redis
          return;
        }
        f.user = std::string(v);
      } else if (EqualsIgnoreCase(k, "SKIPME")) {
        if (EqualsIgnoreCase(v, "yes")) {
          f.skipme = true;
        } else if (EqualsIgnoreCase(v, "no")) {
          f.skipme = false;
        } else {
          ctx.reply->Error(kErrSyntaxError);
          return;
        }
      } else if (EqualsIgnoreCase(k, "TYPE")) {
        if (EqualsIgnoreCase(v, "master") || EqualsIgnoreCase(v, "replica") ||
            EqualsIgnoreCase(v, "slave")) {
          f.type_matches_none = true;
        } else if (EqualsIgnoreCase(v, "normal") || EqualsIgnoreCase(v, "pubsub")) {
          f.type = EqualsIgnoreCase(v, "pubsub") ? 1 : 0;
        } else {
          ctx.reply->Error(UnknownClientTypeError(v));
          return;
        }
      } else if (EqualsIgnoreCase(k, "MAXAGE")) {
        auto a = ParseInt64Strict(v);
        if (!a.has_value() || *a < 0) {
          ctx.reply->Error(kErrNotInteger);
          return;
        }
        f.has_maxage = true;
        f.maxage = static_cast<uint64_t>(*a);
      } else {
        ctx.reply->Error(kErrSyntaxError);
        return;
      }
    }
  }
  std::vector<uint64_t> victims;
  uint64_t now = MonotonicUs();
  if (!f.type_matches_none) {
    ctx.env->clients().ForEach([&](const ClientInfo& c) {
      if (f.has_id && c.id != f.id) return;
      if (!f.addr.empty() && c.addr != f.addr) return;
      if (!f.laddr.empty() && c.laddr != f.laddr) return;
      if (!f.user.empty() && f.user != c.user) return;
      if (f.has_maxage && (now - c.created_us) / 1000000 < f.maxage) return;
      if (f.skipme && c.id == ctx.client->id) return;
      if (f.type >= 0 && c.pubsub.load(std::memory_order_relaxed) != (f.type == 1)) return;
      victims.push_back(c.id);
    });
  }
  size_t killed = 0;
  for (uint64_t id : victims) {
    if (id == ctx.client->id) {
      ctx.client->control->CloseAfterReply();  // after this reply is sent
      ++killed;
    } else if (ctx.env->control().KillClient(id)) {
      ++killed;
    }
  }
  if (old_style) {
    if (killed == 0)
      ctx.reply->Error(kErrNoSuchClient);
    else
      ctx.reply->SimpleString("OK");
  } else {
    ctx.reply->Integer(static_cast<int64_t>(killed));
  }
}

// CLIENT UNBLOCK <id> [TIMEOUT|ERROR]: pion has no blocking commands, so no
// client is ever blocked and there is none to unblock (0), as Redis answers for
// a client that is not blocked.
void ClientUnblock(CommandContext& ctx) {
  const size_t n = ctx.args.size();
  if (n != 3 && n != 4) return ctx.reply->Error(WrongArity("client|unblock"));
  if (n == 4 && !EqualsIgnoreCase(ctx.args[3], "TIMEOUT") &&
      !EqualsIgnoreCase(ctx.args[3], "ERROR"))
    return ctx.reply->Error(kErrClientUnblockReason);
  if (!ParseInt64Strict(ctx.args[2])) return ctx.reply->Error(kErrNotInteger);
  ctx.reply->Integer(0);
}

// CLIENT PAUSE <timeout-ms> [WRITE|ALL]: every client's writes (ALL: every
// command) wait until the timeout has passed (server/client_pause.h,
// CommandService::PostponeMs).
void ClientPauseCommand(CommandContext& ctx) {
  const size_t n = ctx.args.size();
  if (n < 3) return ctx.reply->Error(WrongArity("client|pause"));
  if (n > 4) return ctx.reply->Error(UnknownSubcommandOrArityError("CLIENT", ctx.args[1]));
  bool all = true;
  if (n == 4) {
    if (EqualsIgnoreCase(ctx.args[3], "WRITE"))
      all = false;
    else if (!EqualsIgnoreCase(ctx.args[3], "ALL"))
      return ctx.reply->Error(kErrClientPauseMode);
  }
  auto ms = ParseInt64Strict(ctx.args[2]);
  if (!ms) return ctx.reply->Error(kErrTimeoutNotInteger);
  if (*ms < 0) return ctx.reply->Error(kErrTimeoutNegative);
  const int64_t now = UnixMillis();
  ctx.env->client_pause().Pause(*ms > INT64_MAX - now ? INT64_MAX : now + *ms, all);
  ctx.reply->SimpleString("OK");
}

void ClientHelp(CommandContext& ctx) {
  static const char* kLines[] = {
      "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "ID",
      "    Return the ID of the current connection.",
      "GETNAME",
      "    Return the name of the current connection.",
      "SETNAME <name>",
      "    Assign the name <name> to the current connection.",
      "INFO",
      "    Return information about the current client connection.",
      "LIST [TYPE normal] [ID <id> [<id> ...]]",
      "    Return information about client connections.",
      "KILL <ip:port>",
      "    Kill connection made from <ip:port>.",
      "KILL <option> <value> [<option> <value> [...]]",
      "    Kill connections. Options: ID, ADDR, LADDR, USER, TYPE, SKIPME (yes|no), MAXAGE.",
      "NO-EVICT (ON|OFF)",
      "    Accepted for compatibility.",
      "NO-TOUCH (ON|OFF)",
      "    Accepted for compatibility.",
      "SETINFO <LIB-NAME|LIB-VER> <value>",
      "    Set the client library name or version (shown by CLIENT LIST).",
      "REPLY (ON|OFF|SKIP)",
      "    Control the replies sent to the current connection.",
      "PAUSE <timeout> [WRITE|ALL]",
      "    Suspend all, or just write, clients for <timeout> milliseconds.",
      "UNPAUSE",
      "    Stop the current client pause, resuming traffic.",
      "UNBLOCK <clientid> [TIMEOUT|ERROR]",
      "    Unblock the specified blocked client (pion has no blocking commands: always 0).",
      "CACHING (YES|NO)",
      "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
      "GETREDIR",
      "    Return the client ID we are redirecting to when tracking is enabled.",
      "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
      "         [OPTIN] [OPTOUT] [NOLOOP]",
      "    Control server assisted client side caching.",
      "TRACKINGINFO",
      "    Report tracking status for the current connection.",
      "HELP",
      "    Print this help.",
  };
  ctx.reply->ArrayHeader(std::size(kLines));
  for (const char* l : kLines) ctx.reply->SimpleString(l);
}

void Client(CommandContext& ctx) {
  std::string_view sub = ctx.args[1];
  size_t n = ctx.args.size();
  auto arity = [&](bool ok) {
    if (!ok) ctx.reply->Error(WrongArity("client|" + ToLower(sub)));
    return ok;
  };
  if (EqualsIgnoreCase(sub, "ID")) {
    if (arity(n == 2)) ctx.reply->Integer(static_cast<int64_t>(ctx.client->id));
  } else if (EqualsIgnoreCase(sub, "GETNAME")) {
    if (!arity(n == 2)) return;
    std::string name = ctx.env->clients().Name(ctx.client);
    if (name.empty())
      ctx.reply->Null();
    else
      ctx.reply->Bulk(name);
  } else if (EqualsIgnoreCase(sub, "SETNAME")) {
    if (!arity(n == 3)) return;
    if (!ValidName(ctx.args[2])) {
      ctx.reply->Error(kErrBadClientName);
      return;
    }
    ctx.env->clients().SetName(ctx.client, std::string(ctx.args[2]));
    ctx.reply->SimpleString("OK");
  } else if (EqualsIgnoreCase(sub, "INFO")) {
    if (arity(n == 2)) ClientInfoCmd(ctx);
  } else if (EqualsIgnoreCase(sub, "LIST") || EqualsIgnoreCase(sub, "KILL") ||
             EqualsIgnoreCase(sub, "UNBLOCK") || EqualsIgnoreCase(sub, "PAUSE") ||
             EqualsIgnoreCase(sub, "UNPAUSE")) {
    // Other clients (and other tenants) are @admin's business: these
    // subcommands are @admin @dangerous (SubcommandCategories), as in Redis.
    if (EqualsIgnoreCase(sub, "LIST"))
      ClientList(ctx);
    else if (EqualsIgnoreCase(sub, "UNBLOCK"))
      ClientUnblock(ctx);
    else if (EqualsIgnoreCase(sub, "PAUSE"))
      ClientPauseCommand(ctx);
    else if (EqualsIgnoreCase(sub, "UNPAUSE")) {
      if (!arity(n == 2)) return;
      ctx.env->client_pause().Unpause();
      ctx.reply->SimpleString("OK");
    } else if (arity(n >= 3))
      ClientKill(ctx);
  } else if (EqualsIgnoreCase(sub, "NO-EVICT") || EqualsIgnoreCase(sub, "NO-TOUCH")) {
    if (!arity(n == 3)) return;
    bool on = EqualsIgnoreCase(ctx.args[2], "ON");
    if (!on && !EqualsIgnoreCase(ctx.args[2], "OFF")) return ctx.reply->Error(kErrSyntaxError);
    // NO-EVICT: kept out of client eviction (client_eviction.cc). NO-TOUCH: accepted only.
    if (EqualsIgnoreCase(sub, "NO-EVICT"))
      ctx.client->no_evict.store(on, std::memory_order_relaxed);
    ctx.reply->SimpleString("OK");
  } else if (EqualsIgnoreCase(sub, "SETINFO")) {
    if (!arity(n == 4)) return;
    bool lib_name = EqualsIgnoreCase(ctx.args[2], "LIB-NAME");
    if (!lib_name && !EqualsIgnoreCase(ctx.args[2], "LIB-VER")) {
      ctx.reply->Error(UnrecognizedOptionError(ctx.args[2]));
      return;
    }
    if (!ValidName(ctx.args[3])) {
      ctx.reply->Error(ClientSetInfoBadValueError(ctx.args[2]));
      return;
    }
    ctx.env->clients().SetLibInfo(ctx.client, lib_name, std::string(ctx.args[3]));
    ctx.reply->SimpleString("OK");
  } else if (EqualsIgnoreCase(sub, "REPLY")) {
    if (!arity(n == 3)) return;
    std::string_view m = ctx.args[2];
    // The reply (+OK) is sent for ON and dropped for OFF and SKIP.
    if (EqualsIgnoreCase(m, "ON")) {
      ctx.client->control->SetReplyMode(net::ReplyMode::kOn);
    } else if (EqualsIgnoreCase(m, "OFF")) {
      ctx.client->control->SetReplyMode(net::ReplyMode::kOff);
    } else if (EqualsIgnoreCase(m, "SKIP")) {
      ctx.client->control->SetReplyMode(net::ReplyMode::kSkip);
    } else {
      ctx.reply->Error(kErrSyntaxError);
      return;
    }
    ctx.reply->SimpleString("OK");
  } else if (EqualsIgnoreCase(sub, "TRACKING")) {
    if (arity(n >= 3)) ClientTracking(ctx);
  } else if (EqualsIgnoreCase(sub, "CACHING")) {
    if (arity(n == 3)) ClientCaching(ctx);
  } else if (EqualsIgnoreCase(sub, "GETREDIR")) {
    if (arity(n == 2)) ClientGetRedir(ctx);
  } else if (EqualsIgnoreCase(sub, "TRACKINGINFO")) {
    if (arity(n == 2)) ClientTrackingInfo(ctx);
  } else if (EqualsIgnoreCase(sub, "HELP")) {
    ClientHelp(ctx);
  } else {
    ctx.reply->Error(UnknownSubcommandError("CLIENT", sub));
  }
}

}  // namespace

// CLIENT's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kClientSubcommands[] = {
    {"ID", "5.0.0", "", "Returns the unique client ID of the connection."},
    {"GETNAME", "2.6.9", "", "Returns the name of the connection."},
    {"SETNAME", "2.6.9", "connection-name", "Sets the connection name."},
    {"INFO", "6.2.0", "", "Returns information about the connection."},
    {"LIST", "2.4.0", "[TYPE NORMAL | MASTER | REPLICA | PUBSUB] [ID client-id...]",
     "Lists open connections."},
    {"KILL", "2.4.0",
     "[ip:port] [ID client-id] [TYPE NORMAL | MASTER | REPLICA | PUBSUB] [USER username] [ADDR "
     "ip:port] [LADDR ip:port] [SKIPME YES | NO] [MAXAGE maxage]",
     "Terminates open connections."},
    {"NO-EVICT", "7.0.0", "ON | OFF", "Accepted for compatibility (pion never evicts clients)."},
    {"NO-TOUCH", "7.2.0", "ON | OFF", "Accepted for compatibility."},
    {"SETINFO", "7.2.0", "LIB-NAME libname | LIB-VER libver",
     "Sets the client library name or version (shown by CLIENT LIST)."},
    {"REPLY", "3.2.0", "ON | OFF | SKIP",
     "Turns replies to this connection's commands on, off or off for the next one."},
    {"PAUSE", "3.0.0", "timeout [WRITE | ALL]",
     "Suspends commands processing (every command, or the writes) for a while."},
    {"UNPAUSE", "6.2.0", "", "Resumes processing of paused clients."},
    {"UNBLOCK", "5.0.0", "client-id [TIMEOUT | ERROR]",
     "Unblocks a client blocked by a blocking command (pion has none: always 0)."},
    {"TRACKING", "6.0.0",
     "ON | OFF [REDIRECT client-id] [PREFIX prefix [PREFIX prefix ...]] [BCAST] [OPTIN] [OPTOUT] "
     "[NOLOOP]",
     "Controls server-assisted client-side caching for the connection."},
    {"CACHING", "6.0.0", "YES | NO",
     "Instructs the server whether to track the keys in the next request."},
    {"GETREDIR", "6.0.0", "",
     "Returns the client ID to which the connection's tracking notifications are redirected."},
    {"TRACKINGINFO", "6.2.0", "",
     "Returns information about server-assisted client-side caching for the connection."},
    {"HELP", "5.0.0", "", "Returns helpful text about the subcommands."},
};

void AddClientCommands(std::vector<CommandSpec>* out) {
  out->push_back(
      {"CLIENT", -2, kCmdLoading | kCmdStale, 0, 0, 0, Client,
       "Connection introspection and control: ID, SETNAME, GETNAME, INFO, LIST, KILL, SETINFO, "
       "REPLY, NO-EVICT, NO-TOUCH, TRACKING, CACHING.",
       "connection", "2.4.0", "", kClientSubcommands});
  out->back().acl_categories |= kAclConnection;
}

}  // namespace pion::server
