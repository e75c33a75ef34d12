// PION.STATS (product.md §8): the value receipt, server-wide. 16 fields in a
// fixed order; a map under RESP3, a flat array under RESP2.
#include <string>
#include <vector>

#include "base/clock.h"
#include "server/commands/args.h"
#include "server/server.h"

namespace pion::server {

namespace {

void PionStats(CommandContext& ctx) {
  Receipt& r = ctx.server->receipt();
  if (ctx.args.size() >= 2 && IsKeyword(ctx.args[1], "RESET")) {
    r.Reset();
    ctx.reply->SimpleString("OK");
    return;
  }
  ReceiptSnapshot s = r.Read();
  uint64_t uptime = (MonotonicUs() - ctx.server->start_time_us()) / 1000000;
  ReplyBuilder& out = *ctx.reply;
  out.MapHeader(16);
  auto num = [&](std::string_view k, uint64_t v) {
    out.Bulk(k);
    out.Integer(static_cast<int64_t>(v));
  };
  num("worker_id", 0);  // the receipt is server-wide (every worker)
  num("uptime_in_seconds", uptime);
  num("kvprefix_hits", s.hits);
  num("kvprefix_misses", s.misses);
  num("kvprefix_hits_measured", s.hits_measured);
  num("kvprefix_tokens_served", s.tokens_served);
  num("kvprefix_bytes_served", s.bytes_served);
  num("kvprefix_prefill_us_saved", s.prefill_us_saved);
  num("kvprefix_prefill_us_measured", s.prefill_us_measured);
  out.Bulk("prefill_seconds_avoided");
  out.Bulk(Receipt::SecondsText(s.prefill_us_saved));
  out.Bulk("prefill_seconds_avoided_measured");
  out.Bulk(Receipt::SecondsText(s.prefill_us_measured));
  num("semantic_hits", s.semantic_hits);
  num("semantic_misses", s.semantic_misses);
  num("moe_hits", s.moe_hits);
  num("moe_misses", s.moe_misses);
  num("vector_queries", s.vector_queries);
}

}  // namespace

void AddStatsCommands(std::vector<CommandSpec>* out) {
  out->push_back({"PION.STATS", -1, kCmdReadonly | kCmdFast | kCmdLoading, 0, 0, 0, PionStats,
                  "The value receipt: what the prefix cache saved (RESET zeroes it)"});
  out->back().acl_categories |= kAclKvcache | kAclDangerous;  // server-wide counters
}

}  // namespace pion::server
