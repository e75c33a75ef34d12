#include "server/commands/dispatch.h"

#include <algorithm>

#include "base/strutil.h"
#include "server/commands/errors.h"
#include "server/server.h"

namespace pion::server {

std::string UnknownCommandError(std::span<const std::string_view> args) {
  std::string s = "ERR unknown command '";
  s.append(args[0].substr(0, 128));
  s += "', with args beginning with: ";
  std::string a;
  for (size_t i = 1; i < args.size() && a.size() < 128; ++i) {
    size_t room = 128 - a.size();
    a += '\'';
    a.append(args[i].substr(0, room));
    a += "' ";
  }
  s += a;
  return s;
}

std::string UnknownSubcommandError(std::string_view cmd, std::string_view sub) {
  std::string s = "ERR unknown subcommand '";
  s.append(sub.substr(0, 128));
  s += "'. Try ";
  s += ToUpper(cmd);
  s += " HELP.";
  return s;
}

const CommandSpec* AdmitCommand(Server& server, std::span<const std::string_view> args,
                                bool authenticated, ReplyBuilder* rb) {
  const CommandSpec* spec = server.commands().Find(args[0]);
  if (spec == nullptr) {
    rb->Error(UnknownCommandError(args));
    return nullptr;
  }
  int argc = static_cast<int>(args.size());
  const bool own_arity = (spec->flags & kCmdOwnArity) != 0;
  if (!own_arity &&
      ((spec->arity > 0 && spec->arity != argc) || (spec->arity < 0 && argc < -spec->arity))) {
    rb->Error(WrongArity(spec->name));
    return nullptr;
  }
  if (!authenticated && !(spec->flags & kCmdNoAuth)) {
    rb->Error(kErrNoAuth);
    return nullptr;
  }
  if ((spec->flags & kCmdKvcache) && server.store() == nullptr) {
    rb->Error(kErrNotEnabled);
    return nullptr;
  }
  if (server.loading() && !(spec->flags & kCmdLoading)) {
    rb->Error(kErrLoading);
    return nullptr;
  }
  return spec;
}

}  // namespace pion::server
