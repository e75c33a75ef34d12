#include "server/dispatch.h"

#include <algorithm>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/server.h"

namespace pion::server {

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
