// ACL SETUSER / GETUSER / DELUSER / LIST / USERS / WHOAMI / CAT / DRYRUN /
// LOG / LOAD / SAVE / GENPASS / HELP (docs/protocol.md "ACL", docs/security.md).
// The users and the checks live in server/acl.h; these handlers parse and
// reply with Redis 7.0's shapes and texts.
#include "server/acl.h"

#include <openssl/rand.h>

#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "net/client_control.h"
#include "net/client_info.h"
#include "server/command_env.h"
#include "server/commands/command_table.h"

namespace pion::server {

namespace {

// ACL's InvalidArgument statuses carry the whole reply text (as CONFIG SET's).
void ReplyStatus(CommandContext& ctx, const Status& st) {
  if (st.code() == Code::kInvalidArgument)
    ctx.reply->Error(st.message());
  else
    ctx.reply->Error(StatusToError(st));
}

bool SubArity(CommandContext& ctx, std::string_view sub, size_t min, size_t max) {
  size_t n = ctx.args.size();
  if (n < min || n > max) {
    ctx.reply->Error(WrongArity("acl|" + ToLower(sub)));
    return false;
  }
  return true;
}

void SetUser(CommandContext& ctx) {
  std::vector<std::string_view> rules(ctx.args.begin() + 3, ctx.args.end());
  Status st = ctx.env->acl().SetUser(ctx.args[2], rules);
  if (!st.ok()) {
    ReplyStatus(ctx, st);
    return;
  }
  ctx.env->control().KillPubSubClientsOfUsers();  // channel rights may have shrunk
  ctx.reply->SimpleString("OK");
}

// "&*", or each &pattern ("" for none), as Redis 7.0's GETUSER.
std::string GetUserChannels(const AclUser& u) {
  std::string chans = u.allchannels ? "&*" : "";
  for (const std::string& p : u.channels) chans += (chans.empty() ? "&" : " &") + p;
  return chans;
}

void GetUser(CommandContext& ctx) {
  auto u = ctx.env->acl().Find(ctx.args[2]);
  if (u == nullptr) {
    ctx.reply->NullArray();
    return;
  }
  ReplyBuilder* rb = ctx.reply;
  rb->MapHeader(6);
  rb->Bulk("flags");
  std::vector<const char*> flags = {u->enabled ? "on" : "off"};
  if (u->nopass) flags.push_back("nopass");
  rb->ArrayHeader(flags.size());
  for (const char* f : flags) rb->Bulk(f);
  rb->Bulk("passwords");
  rb->ArrayHeader(u->passwords.size());
  for (const std::string& p : u->passwords) rb->Bulk(p);
  rb->Bulk("commands");
  rb->Bulk(u->CommandsDescription());
  rb->Bulk("keys");
  rb->Bulk(u->KeysDescription());
  rb->Bulk("channels");
  rb->Bulk(GetUserChannels(*u));
  rb->Bulk("selectors");
  rb->ArrayHeader(u->selectors.size());
  for (const auto& sel : u->selectors) {
    rb->MapHeader(3);
    rb->Bulk("commands");
    rb->Bulk(sel->CommandsDescription());
    rb->Bulk("keys");
    rb->Bulk(sel->KeysDescription());
    rb->Bulk("channels");
    rb->Bulk(GetUserChannels(*sel));
  }
}

void DelUser(CommandContext& ctx) {
  std::vector<std::string_view> names(ctx.args.begin() + 2, ctx.args.end());
  auto n = ctx.env->acl().DelUsers(names);
  if (!n.ok()) {
    ReplyStatus(ctx, n.status());
    return;
  }
  // Clients authenticated as a deleted user are closed (as Redis does).
  ctx.env->control().KillClientsOfUsers(std::vector<std::string>(names.begin(), names.end()));
  ctx.reply->Integer(*n);
}

void Cat(CommandContext& ctx) {
  if (ctx.args.size() == 2) {
    auto names = AclCategoryNames();
    ctx.reply->ArrayHeader(names.size());
    for (const char* n : names) ctx.reply->Bulk(n);
    return;
  }
  uint32_t bit = AclCategoryBit(ctx.args[2]);
  if (bit == 0) {
    ctx.reply->Error(AclUnknownCategoryError(ctx.args[2]));
    return;
  }
  std::vector<std::string> names;
  for (const CommandSpec& s : ctx.env->commands().specs())
    if (CommandCategories(s) & bit) names.push_back(ToLower(s.name));
  ctx.reply->ArrayHeader(names.size());
  for (const std::string& n : names) ctx.reply->Bulk(n);
}

void DryRun(CommandContext& ctx) {
  auto u = ctx.env->acl().Find(ctx.args[2]);
  if (u == nullptr) {
    ctx.reply->Error(AclUserNotFoundError(ctx.args[2]));
    return;
  }
  const CommandTable& table = ctx.env->commands();
  const CommandSpec* spec = table.Find(ctx.args[3]);
  if (spec == nullptr) {
    ctx.reply->Error(AclCommandNotFoundError(ctx.args[3]));
    return;
  }
  std::span<const std::string_view> args = ctx.args.subspan(3);
  int argc = static_cast<int>(args.size());
  if ((spec->arity > 0 && spec->arity != argc) || (spec->arity < 0 && argc < -spec->arity)) {
    ctx.reply->Error(WrongArity(spec->name));
    return;
  }
  std::string_view key;
  size_t index = static_cast<size_t>(spec - table.specs().data());
  AclDenial d =
      (spec->flags & kCmdNoAuth) ? AclDenial::kNone : Acl::Check(*u, *spec, index, args, &key);
  if (d == AclDenial::kNone)
    ctx.reply->SimpleString("OK");
  else if (d == AclDenial::kCommand)  // as Redis: a subcommand by its full name ("config|set")
    ctx.reply->Bulk(AclDryRunCommandError(table.stat_name(table.StatIndex(spec, args))));
  else if (d == AclDenial::kChannel)
    ctx.reply->Bulk(AclDryRunChannelError(key));
  else
    ctx.reply->Bulk(AclDryRunKeyError(key));
}

void Log(CommandContext& ctx) {
  size_t max = 10;
  if (ctx.args.size() == 3) {
    if (EqualsIgnoreCase(ctx.args[2], "RESET")) {
      ctx.env->acl().ResetLog();
      ctx.reply->SimpleString("OK");
      return;
    }
    auto n = ParseInt64Strict(ctx.args[2]);
    if (!n.has_value() || *n < 0) {
      ctx.reply->Error(kErrNotInteger);
      return;
    }
    max = static_cast<size_t>(*n);
  }
  uint64_t now = MonotonicUs();
  auto entries = ctx.env->acl().LogEntries(max);
  ReplyBuilder* rb = ctx.reply;
  rb->ArrayHeader(entries.size());
  for (const AclLogEntry& e : entries) {
    rb->MapHeader(7);
    rb->Bulk("count");
    rb->Integer(static_cast<int64_t>(e.count));
    rb->Bulk("reason");
    rb->Bulk(e.reason);
    rb->Bulk("context");
    rb->Bulk(e.context);
    rb->Bulk("object");
    rb->Bulk(e.object);
    rb->Bulk("username");
    rb->Bulk(e.username);
    rb->Bulk("age-seconds");
    rb->Double(static_cast<double>(now - e.created_us) / 1e6);
    rb->Bulk("client-info");
    rb->Bulk(e.client_info);
  }
}

void Load(CommandContext& ctx) {
  const std::string& path = ctx.env->config().aclfile;
  if (path.empty()) {
    ctx.reply->Error(kErrAclNoFile);
    return;
  }
  auto lines = ReadAclFile(path);
  if (!lines.ok()) {
    ctx.reply->Error(StatusToError(lines.status()));
    return;
  }
  std::vector<std::string> before;
  for (const auto& u : ctx.env->acl().Users()) before.push_back(u->name);
  Status st = ctx.env->acl().LoadLines(*lines, path);
  if (!st.ok()) {
    ReplyStatus(ctx, st);
    return;
  }
  // Users that no longer exist lose their clients.
  std::vector<std::string> gone;
  for (const std::string& n : before)
    if (ctx.env->acl().Find(n) == nullptr) gone.push_back(n);
  if (!gone.empty()) ctx.env->control().KillClientsOfUsers(gone);
  ctx.env->control().KillPubSubClientsOfUsers();
  ctx.reply->SimpleString("OK");
}

void Save(CommandContext& ctx) {
  const std::string& path = ctx.env->config().aclfile;
  if (path.empty()) {
    ctx.reply->Error(kErrAclNoFile);
    return;
  }
  Status st = WriteAclFile(path, ctx.env->acl().ListLines());
  if (!st.ok()) {
    ctx.reply->Error(StatusToError(st));
    return;
  }
  ctx.reply->SimpleString("OK");
}

void GenPass(CommandContext& ctx) {
  int64_t bits = 256;
  if (ctx.args.size() == 3) {
    auto n = ParseInt64Strict(ctx.args[2]);
    if (!n.has_value() || *n <= 0 || *n > 4096) {
      ctx.reply->Error(kErrAclGenpass);
      return;
    }
    bits = *n;
  }
  size_t chars = static_cast<size_t>((bits + 3) / 4);
  std::vector<unsigned char> raw((chars + 1) / 2);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) {
    ctx.reply->Error(kErrRandomBytes);
    return;
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  out.resize(chars);
  ctx.reply->Bulk(out);
}

void Help(CommandContext& ctx) {
  static const char* kLines[] = {
      "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "CAT [<category>]",
      "    List all commands that belong to <category>, or all command categories",
      "DELUSER <username> [<username> ...]",
      "    Delete a list of users.",
      "DRYRUN <username> <command> [<arg> ...]",
      "    Returns whether the user can execute the given command without executing it.",
      "GETUSER <username>",
      "    Get the user's details.",
      "GENPASS [<bits>]",
      "    Generate a secure 256-bit user password. The optional `bits` argument can",
      "    be used to specify a different size.",
      "LIST",
      "    Show users details in config file format.",
      "LOAD",
      "    Reload users from the ACL file.",
      "LOG [<count> | RESET]",
      "    Show the ACL log entries.",
      "SAVE",
      "    Save the current config to the ACL file.",
      "SETUSER <username> <attribute> [<attribute> ...]",
      "    Create or modify a user with the specified attributes.",
      "USERS",
      "    List all the registered usernames.",
      "WHOAMI",
      "    Return the current connection username.",
      "HELP",
      "    Print this help.",
  };
  ctx.reply->ArrayHeader(std::size(kLines));
  for (const char* l : kLines) ctx.reply->SimpleString(l);
}

void AclCmd(CommandContext& ctx) {
  std::string_view sub = ctx.args[1];
  auto is = [&](const char* s) { return EqualsIgnoreCase(sub, s); };
  constexpr size_t kAny = SIZE_MAX;
  if (is("SETUSER")) {
    if (SubArity(ctx, sub, 3, kAny)) SetUser(ctx);
  } else if (is("GETUSER")) {
    if (SubArity(ctx, sub, 3, 3)) GetUser(ctx);
  } else if (is("DELUSER")) {
    if (SubArity(ctx, sub, 3, kAny)) DelUser(ctx);
  } else if (is("LIST")) {
    if (!SubArity(ctx, sub, 2, 2)) return;
    auto lines = ctx.env->acl().ListLines();
    ctx.reply->ArrayHeader(lines.size());
    for (const std::string& l : lines) ctx.reply->Bulk(l);
  } else if (is("USERS")) {
    if (!SubArity(ctx, sub, 2, 2)) return;
    auto users = ctx.env->acl().Users();
    ctx.reply->ArrayHeader(users.size());
    for (const auto& u : users) ctx.reply->Bulk(u->name);
  } else if (is("WHOAMI")) {
    if (!SubArity(ctx, sub, 2, 2)) return;
    ctx.reply->Bulk(ctx.env->control().ClientUserName(ctx.client));
  } else if (is("CAT")) {
    // As Redis (acl|cat is -2): more than one category is a syntax error.
    if (ctx.args.size() > 3) return ctx.reply->Error(UnknownSubcommandOrArityError("acl", sub));
    Cat(ctx);
  } else if (is("DRYRUN")) {
    if (SubArity(ctx, sub, 4, kAny)) DryRun(ctx);
  } else if (is("LOG")) {
    if (ctx.args.size() > 3) {
      ctx.reply->Error(UnknownSubcommandOrArityError("acl", sub));
      return;
    }
    Log(ctx);
  } else if (is("LOAD")) {
    if (SubArity(ctx, sub, 2, 2)) Load(ctx);
  } else if (is("SAVE")) {
    if (SubArity(ctx, sub, 2, 2)) Save(ctx);
  } else if (is("GENPASS")) {
    if (ctx.args.size() > 3) return ctx.reply->Error(UnknownSubcommandOrArityError("acl", sub));
    GenPass(ctx);
  } else if (is("HELP")) {
    if (SubArity(ctx, sub, 2, 2)) Help(ctx);
  } else {
    ctx.reply->Error(UnknownSubcommandError("acl", sub));
  }
}

}  // namespace

// ACL's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kAclSubcommands[] = {
    {"SETUSER", "6.0.0", "username [rule...]", "Creates and modifies an ACL user and its rules."},
    {"GETUSER", "6.0.0", "username", "Lists the ACL rules of a user."},
    {"DELUSER", "6.0.0", "username...", "Deletes ACL users."},
    {"LIST", "6.0.0", "", "Dumps the effective rules in ACL file format."},
    {"USERS", "6.0.0", "", "Lists all ACL users."},
    {"WHOAMI", "6.0.0", "", "Returns the user the connection is authenticated as."},
    {"CAT", "6.0.0", "[category]", "Lists the ACL categories, or the commands inside a category."},
    {"DRYRUN", "7.0.0", "username command [arg...]",
     "Simulates the execution of a command by a user without executing it."},
    {"LOG", "6.0.0", "[count | RESET]", "Lists recent security events."},
    {"LOAD", "6.0.0", "", "Reloads the rules from the ACL file."},
    {"SAVE", "6.0.0", "", "Saves the effective ACL rules in the ACL file."},
    {"GENPASS", "6.0.0", "[bits]", "Generates a secure pseudorandom password."},
    {"HELP", "6.0.0", "", "Returns helpful text about the subcommands."},
};

void AddAclCommands(std::vector<CommandSpec>* out) {
  out->push_back({"ACL", -2, kCmdAdmin | kCmdLoading | kCmdStale, 0, 0, 0, AclCmd,
                  "Users, their passwords, command permissions and key patterns.", "server",
                  "6.0.0", "", kAclSubcommands});
}

}  // namespace pion::server
