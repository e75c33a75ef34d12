// Dispatch: the checks every command goes through before its handler runs, in
// Redis' order: unknown command, arity, authentication (-NOAUTH), --kvcache
// (kCmdKvcache), then loading (-LOADING for commands without kCmdLoading). A
// rejected command gets its error reply here, so handlers can assume their
// arity, an authenticated client and, for kCmdKvcache, store() != nullptr.
//
// Thread-safety: pure functions of their arguments; called on worker threads.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "kvproto/errors.h"
#include "server/commands/command.h"
#include "server/commands/command_table.h"

namespace pion::server {

class Server;

// The spec to run, or nullptr after writing the error reply to `rb`.
const CommandSpec* AdmitCommand(Server& server, std::span<const std::string_view> args,
                                bool authenticated, ReplyBuilder* rb);

}  // namespace pion::server
