// Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET
// (docs/protocol.md "Connection"). They run on the client's worker thread and
// may change that connection's state through ClientInfo::conn.
#include <string>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "net/client_control.h"
#include "net/client_info.h"
#include "server/command_env.h"
#include "server/commands/command_table.h"
#include "server/commands/transaction.h"

namespace pion::server {

namespace {

// Authenticates the client as `user` (ACL: on, and nopass or one of its
// passwords). A failure is counted in ACL LOG (reason "auth").
bool Login(CommandContext& ctx, std::string_view user, std::string_view pass) {
  CommandEnv& s = *ctx.env;
  std::shared_ptr<const AclUser> u = s.acl().Authenticate(user, pass);
  if (u == nullptr) {
    const TxState* tx = TxOf(ctx.client);
    s.acl().Log("auth", "AUTH", user, s.control().ClientLine(ctx.client),
                tx != nullptr && tx->in_multi ? kAclLogMulti : kAclLogTopLevel);
    return false;
  }
  s.control().SetClientUser(ctx.client, std::move(u));
  return true;
}

void Ping(CommandContext& ctx) {
  if (ctx.args.size() > 2) {
    ctx.reply->Error(WrongArity("ping"));
    return;
  }
  if (ctx.client->pubsub.load(std::memory_order_relaxed) && ctx.reply->proto() == 2) {
    // RESP2 subscribed mode: a two-element array, as Redis answers there.
    ctx.reply->ArrayHeader(2);
    ctx.reply->Bulk("pong");
    ctx.reply->Bulk(ctx.args.size() == 1 ? std::string_view() : ctx.args[1]);
    return;
  }
  if (ctx.args.size() == 1)
    ctx.reply->SimpleString("PONG");
  else
    ctx.reply->Bulk(ctx.args[1]);
}

void Echo(CommandContext& ctx) { ctx.reply->Bulk(ctx.args[1]); }

void Hello(CommandContext& ctx) {
  ClientControl* conn = ctx.client->control;
  int64_t ver = 0;
  size_t j = 1;
  if (ctx.args.size() >= 2) {
    auto v = ParseInt64Strict(ctx.args[1]);
    if (!v.has_value()) {
      ctx.reply->Error(kErrHelloProtoNotInteger);
      return;
    }
    if (*v < 2 || *v > 3) {
      ctx.reply->Error(kErrNoProto);
      return;
    }
    ver = *v;
    j = 2;
  }
  bool authed = conn->authenticated();
  bool set_name = false;
  std::string_view name;
  for (; j < ctx.args.size(); ++j) {
    size_t more = ctx.args.size() - 1 - j;
    std::string_view opt = ctx.args[j];
    if (EqualsIgnoreCase(opt, "AUTH") && more >= 2) {
      if (!Login(ctx, ctx.args[j + 1], ctx.args[j + 2])) {
        ctx.reply->Error(kErrWrongPass);
        return;
      }
      authed = true;
      j += 2;
    } else if (EqualsIgnoreCase(opt, "SETNAME") && more >= 1) {
      name = ctx.args[j + 1];
      for (char c : name) {
        if (c < '!' || c > '~') {
          ctx.reply->Error(kErrBadClientName);
          return;
        }
      }
      set_name = true;
      ++j;
    } else {
      ctx.reply->Error(HelloOptionError(opt));
      return;
    }
  }
  if (!authed) {
    ctx.reply->Error(kErrHelloNoAuth);
    return;
  }
  conn->SetAuthenticated(true);
  if (set_name) ctx.env->clients().SetName(ctx.client, std::string(name));
  // The protocol switches before the reply is written.
  if (ver != 0) conn->SetProto(static_cast<int>(ver));
  ReplyBuilder* rb = ctx.reply;
  rb->MapHeader(7);
  rb->Bulk("server");
  rb->Bulk("pion");
  rb->Bulk("version");
  rb->Bulk(PION_VERSION);
  rb->Bulk("proto");
  rb->Integer(conn->proto());
  rb->Bulk("id");
  rb->Integer(static_cast<int64_t>(ctx.client->id));
  rb->Bulk("mode");
  rb->Bulk("standalone");
  rb->Bulk("role");
  rb->Bulk("master");
  rb->Bulk("modules");
  rb->ArrayHeader(0);
}

void Auth(CommandContext& ctx) {
  if (ctx.args.size() > 3) {
    ctx.reply->Error(kErrSyntaxError);
    return;
  }
  std::string_view user = "default";
  std::string_view pass = ctx.args[1];
  if (ctx.args.size() == 3) {
    user = ctx.args[1];
    pass = ctx.args[2];
  } else if (ctx.env->control().default_user_open()) {
    ctx.reply->Error(kErrAuthNoPassword);
    return;
  }
  if (!Login(ctx, user, pass)) {
    ctx.reply->Error(kErrWrongPass);
    return;
  }
  ctx.client->control->SetAuthenticated(true);
  ctx.reply->SimpleString("OK");
}

void Select(CommandContext& ctx) {
  auto db = ParseInt64Strict(ctx.args[1]);
  if (!db.has_value()) {
    ctx.reply->Error(kErrNotInteger);
    return;
  }
  if (*db != 0) {
    ctx.reply->Error(kErrDbIndexOutOfRange);
    return;
  }
  ctx.reply->SimpleString("OK");
}

void Quit(CommandContext& ctx) {
  ctx.reply->SimpleString("OK");
  ctx.client->control->CloseAfterReply();
}

void Reset(CommandContext& ctx) {
  ClientControl* conn = ctx.client->control;
  conn->SetProto(2);
  ctx.env->clients().SetName(ctx.client, "");
  ctx.env->control().SetClientUser(ctx.client, ctx.env->acl().Default());
  conn->SetAuthenticated(ctx.env->control().default_user_open());
  ctx.client->no_evict.store(false, std::memory_order_relaxed);  // CLIENT NO-EVICT off
  TxClear(ctx.client);                                // leaves MULTI, forgets WATCHed keys
  ctx.env->control().PubSubRemoveClient(ctx.client);  // every subscription goes
  ctx.env->tracking().Disable(ctx.client);            // CLIENT TRACKING off
  // MONITOR off (as Redis): no more lines, and no `O` flag in CLIENT LIST.
  ctx.env->observability().RemoveMonitor(ctx.client);
  ctx.client->monitor.store(false, std::memory_order_relaxed);
  ctx.reply->SimpleString("RESET");
}

}  // namespace

void AddConnectionCommands(std::vector<CommandSpec>* out) {
  constexpr uint32_t kAlways = kCmdFast | kCmdLoading | kCmdStale;
  size_t first = out->size();
  out->push_back({"PING", -1, kAlways | kCmdPubSubContext, 0, 0, 0, Ping,
                  "Returns PONG, or the argument.", "connection", "1.0.0", "[message]"});
  out->push_back({"ECHO", 2, kAlways, 0, 0, 0, Echo, "Returns the argument.", "connection", "1.0.0",
                  "message"});
  out->push_back({"HELLO", -1, kAlways | kCmdNoAuth, 0, 0, 0, Hello,
                  "Handshake: protocol version, optional AUTH and SETNAME.", "connection", "6.0.0",
                  "[protover [AUTH username password] [SETNAME clientname]]"});
  out->push_back({"AUTH", -2, kAlways | kCmdNoAuth, 0, 0, 0, Auth, "Authenticates the connection.",
                  "connection", "1.0.0", "[username] password"});
  out->push_back({"SELECT", 2, kAlways, 0, 0, 0, Select, "Selects database 0 (the only one).",
                  "connection", "1.0.0", "index"});
  out->push_back({"QUIT", -1, kAlways | kCmdNoAuth | kCmdTxControl | kCmdPubSubContext, 0, 0, 0,
                  Quit, "Closes the connection.", "connection", "1.0.0", ""});
  out->push_back({"RESET", 1, kAlways | kCmdNoAuth | kCmdTxControl | kCmdPubSubContext, 0, 0, 0,
                  Reset, "Resets the connection: RESP2, no name, not authenticated.", "connection",
                  "6.2.0", ""});
  for (size_t i = first; i < out->size(); ++i) (*out)[i].acl_categories |= kAclConnection;
}

}  // namespace pion::server
