// String reads of values in the disk tier that do not block the worker (docs/
// operations.md "Disk tier", Reads): the read is started (through the worker's
// own ring, or on a tier I/O thread: Store::ReadTiered), the reply's place is
// kept (ctx.Defer()), and the reply is written when the read is done, while the
// worker serves others meanwhile. A damaged extent is never served: the entry
// is dropped as the tier drops entries. Another read error answers the error
// and keeps the entry.
#pragma once

#include <functional>

#include "server/commands/command.h"
#include "store/strings.h"

namespace pion::server {

// GET of `v` (on disk): promoted when the budget allows, then the value (nil if damaged).
void ReplyFromTier(CommandContext& ctx, store::StrRef v);

// GETRANGE, GETDEL, GETEX of ctx.args[1]'s value `v` (on disk; GETDEL's key is
// already gone): `write` writes the reply from the value read, or from null
// when it was damaged. Not promoted (as the other reads). Requires ctx.CanDefer().
using TierValueReply = std::function<void(ReplyBuilder& rb, const store::StrRef& value)>;
void ReplyAfterTierRead(CommandContext& ctx, store::StrRef v, TierValueReply write);

}  // namespace pion::server
