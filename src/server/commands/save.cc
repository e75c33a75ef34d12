// SAVE, BGSAVE [SCHEDULE] and BGREWRITEAOF (docs/protocol.md "Server"): Redis's
// persistence commands over pion's one persistence operation, the snapshot that
// KV.PREFIX.SAVE takes (every namespace and string key, then the WAL truncated
// to what follows it: the append-only log rewritten as a snapshot). They need
// persistence (appendonly yes); without it pion keeps nothing on disk and they
// answer "-ERR persistence is not enabled". One save at a time, as Redis.
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "persist/persistence.h"
#include "server/command_env.h"
#include "server/commands/command_table.h"

namespace pion::server {

namespace {

// SAVE: the snapshot, answered once it is on disk. The worker keeps serving
// its other clients meanwhile (the reply is completed from the background).
void Save(CommandContext& ctx) {
  persist::Persistence* p = ctx.env->persistence();
  if (p == nullptr) return ctx.reply->Error(kErrNoPersistence);
  CommandEnv* env = ctx.env;
  if (!env->saves().TryBeginSave()) return ctx.reply->Error(kErrSaveInProgress);
  std::shared_ptr<DeferredReply> done = ctx.Defer();
  bool queued = env->background().Post([env, p, done] {
    Status st = p->Save(std::string());
    env->saves().EndSave();
    if (st.ok())
      done->SimpleString("OK");
    else
      done->Error(StatusToError(st));
  });
  if (!queued) {
    env->saves().EndSave();
    done->Complete([](ReplyBuilder& r) { r.Error(kErrShuttingDown); });
  }
}

// BGSAVE and BGREWRITEAOF: the snapshot in the background, answered at once
// with `started` (`scheduled` inside a transaction, as Redis words it then).
void BackgroundSave(CommandContext& ctx, bool aof_rewrite, std::string_view started,
                    std::string_view scheduled, std::string_view busy) {
  switch (ctx.env->saves().StartBackgroundSave(aof_rewrite)) {
    case BgSaveStart::kNoPersistence:
      return ctx.reply->Error(kErrNoPersistence);
    case BgSaveStart::kBusy:
      return ctx.reply->Error(busy);
    case BgSaveStart::kShuttingDown:
      return ctx.reply->Error(kErrShuttingDown);
    case BgSaveStart::kStarted:
      break;
  }
  ctx.reply->SimpleString(ctx.in_exec ? scheduled : started);
}

void BgSave(CommandContext& ctx) {
  if (ctx.args.size() > 2 || (ctx.args.size() == 2 && !EqualsIgnoreCase(ctx.args[1], "SCHEDULE")))
    return ctx.reply->Error(kErrSyntaxError);
  BackgroundSave(ctx, false, "Background saving started", "Background saving scheduled",
                 kErrSaveInProgress);
}

void BgRewriteAof(CommandContext& ctx) {
  BackgroundSave(ctx, true, "Background append only file rewriting started",
                 "Background append only file rewriting scheduled", kErrAofRewriteInProgress);
}

}  // namespace

void AddSaveCommands(std::vector<CommandSpec>* out) {
  // SAVE completes its reply later (no MULTI, as Redis's SAVE); the others answer at once.
  out->push_back({"SAVE", 1, kCmdAdmin | kCmdNoMulti, 0, 0, 0, Save,
                  "Snapshots the data set (KV.PREFIX.SAVE's snapshot); needs persistence.",
                  "server", "1.0.0", ""});
  out->push_back({"BGSAVE", -1, kCmdAdmin, 0, 0, 0, BgSave,
                  "Snapshots the data set in the background; needs persistence.", "server", "1.0.0",
                  "[SCHEDULE]"});
  out->push_back({"BGREWRITEAOF", 1, kCmdAdmin, 0, 0, 0, BgRewriteAof,
                  "Rewrites the WAL as a snapshot in the background; needs persistence.", "server",
                  "1.0.0", ""});
}

}  // namespace pion::server
