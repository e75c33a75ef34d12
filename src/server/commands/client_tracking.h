// CLIENT TRACKING | CACHING | GETREDIR | TRACKINGINFO (client-side caching,
// server/tracking.h; docs/protocol.md "Client-side caching").
#pragma once

#include "server/commands/command.h"

namespace pion::server {

// Each answers `ctx` for its subcommand (the argument count already checked
// by the caller where Redis's arity fixes it).
void ClientTracking(CommandContext& ctx);
void ClientCaching(CommandContext& ctx);
void ClientGetRedir(CommandContext& ctx);
void ClientTrackingInfo(CommandContext& ctx);

}  // namespace pion::server
