// PION.STATS (docs/protocol.md "The value receipt"): the value receipt, server-wide. 16 fields in a
// fixed order; a map under RESP3, a flat array under RESP2.
#include <string>
#include <vector>

#include "base/clock.h"
#include "server/command_env.h"
#include "server/commands/args.h"

namespace pion::server {

namespace {

void PionStats(CommandContext& ctx) {
  Receipt& r = ctx.env->receipt();
  if (ctx.args.size() >= 2 && IsKeyword(ctx.args[1], "RESET")) {
    r.Reset();
    ctx.reply->SimpleString("OK");
    return;
  }
  ReceiptSnapshot s = r.Read();
  uint64_t uptime = (MonotonicUs() - ctx.env->control().start_time_us()) / 1000000;
  ReplyBuilder& out = *ctx.reply;
  out.MapHeader(kReceiptFields);
  for (const ReceiptField& f : ReceiptFields(s, uptime)) {
    out.Bulk(f.name);
    if (f.seconds_text)
      out.Bulk(Receipt::SecondsText(f.value));
    else
      out.Integer(static_cast<int64_t>(f.value));
  }
}

}  // namespace

void AddStatsCommands(std::vector<CommandSpec>* out) {
  const PionHandler handlers[] = {{"PION.STATS", PionStats}};
  AddPionCommands(handlers, out);
}

}  // namespace pion::server
