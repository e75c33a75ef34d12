// MULTI / EXEC / DISCARD / WATCH / UNWATCH: see transaction.h.
#include "server/commands/transaction.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "net/client_info.h"
#include "server/acl.h"
#include "server/command_env.h"
#include "server/command_stats.h"
#include "server/commands/command_table.h"
#include "store/key_ops.h"
#include "store/store.h"

namespace pion::server {

TxState* TxOf(ClientInfo* c) { return static_cast<TxState*>(c->service_data); }

TxState& TxFor(ClientInfo* c) {
  if (c->service_data == nullptr) {
    TxState* tx = new TxState();
    tx->owner = c;
    c->service_data = tx;
  }
  return *TxOf(c);
}

void TxState::Publish() {
  if (owner == nullptr) return;
  owner->multi.store(in_multi ? static_cast<int64_t>(queued.size()) : -1,
                     std::memory_order_relaxed);
  owner->multi_mem.store(queued_mem, std::memory_order_relaxed);
}

void TxFree(ClientInfo* c) {
  delete TxOf(c);
  c->service_data = nullptr;
}

void TxClear(ClientInfo* c) {
  if (TxState* tx = TxOf(c)) tx->Reset();
}

void TxQueue(CommandContext& ctx, const CommandSpec* spec, TxState& tx) {
  if (spec->flags & kCmdNoMulti) {
    tx.dirty = true;
    ctx.reply->Error(kErrNotInMulti);
    return;
  }
  if (spec->flags & kCmdDenyOom) tx.denyoom = true;
  TxState::Queued q;
  q.spec = spec;
  q.args.reserve(ctx.args.size());
  uint64_t mem = sizeof(TxState::Queued);
  for (std::string_view a : ctx.args) {
    q.args.emplace_back(a);
    mem += sizeof(std::string) + a.size();
  }
  tx.queued.push_back(std::move(q));
  tx.queued_mem += mem;
  tx.Publish();
  ctx.reply->SimpleString("QUEUED");
}

namespace {

uint64_t VersionOf(CommandEnv& s, std::string_view key) {
  store::Store* st = s.store();
  return st != nullptr ? store::OpKeyVersion({*st}, key) : 0;
}

void Multi(CommandContext& ctx) {
  TxState& tx = TxFor(ctx.client);
  if (tx.in_multi) {
    ctx.reply->Error(kErrMultiNested);
    return;
  }
  tx.in_multi = true;
  tx.dirty = false;
  tx.denyoom = false;
  tx.queued.clear();
  tx.queued_mem = 0;
  tx.Publish();
  ctx.reply->SimpleString("OK");
}

void Discard(CommandContext& ctx) {
  TxState* tx = TxOf(ctx.client);
  if (tx == nullptr || !tx->in_multi) {
    ctx.reply->Error(kErrDiscardWithoutMulti);
    return;
  }
  tx->Reset();
  ctx.reply->SimpleString("OK");
}

void Exec(CommandContext& ctx) {
  TxState* tx = TxOf(ctx.client);
  if (tx == nullptr || !tx->in_multi) {
    ctx.reply->Error(kErrExecWithoutMulti);
    return;
  }
  if (tx->dirty) {
    tx->Reset();
    ctx.reply->Error(kErrExecAbort);
    return;
  }
  std::unique_lock<WriterFirstMutex> excl(ctx.env->exec_mu());
  for (const auto& [key, version] : tx->watched) {
    if (VersionOf(*ctx.env, key) != version) {
      tx->Reset();
      ctx.reply->NullArray();
      return;
    }
  }
  std::vector<TxState::Queued> queued = std::move(tx->queued);
  tx->Reset();
  ctx.reply->ArrayHeader(queued.size());
  std::vector<std::string_view> views;
  // As Redis: each command is counted on its own (commandstats, errorstats),
  // and the slow log, the latency monitor and MONITOR see it, after it ran
  // (so MONITOR shows MULTI, the commands, then EXEC).
  CommandStats& stats = ctx.env->control().cmdstats_of(ctx.client->worker);
  const CommandTable& table = ctx.env->commands();
  const uint64_t errors_before = ctx.reply->error_count();
  for (TxState::Queued& q : queued) {
    views.assign(q.args.begin(), q.args.end());
    CommandContext sub;
    sub.args = views;
    sub.reply = ctx.reply;
    sub.env = ctx.env;
    sub.client = ctx.client;
    sub.in_exec = true;
    // As Redis 7: permissions are checked again at EXEC (ACL SETUSER may have
    // narrowed them since the command was queued).
    const AclUser* u = ctx.env->ClientUser(ctx.client);
    if (u == nullptr || !u->unrestricted) {
      std::string_view key;
      size_t index = static_cast<size_t>(q.spec - ctx.env->commands().specs().data());
      AclDenial d =
          u == nullptr ? AclDenial::kCommand : Acl::Check(*u, *q.spec, index, views, &key);
      if (d != AclDenial::kNone) {
        std::string who = u != nullptr ? u->name : std::string();
        if (d == AclDenial::kCommand) {
          const std::string& name = table.stat_name(table.StatIndex(q.spec, views));
          ctx.reply->Error(NoPermCommandError(name));
          ctx.env->acl().Log("command", name, who, ctx.env->control().ClientLine(ctx.client),
                             kAclLogMulti);
        } else if (d == AclDenial::kChannel) {
          ctx.reply->Error(kErrNoPermChannel);
          ctx.env->acl().Log("channel", key, who, ctx.env->control().ClientLine(ctx.client),
                             kAclLogMulti);
        } else {
          ctx.reply->Error(kErrNoPermKey);
          ctx.env->acl().Log("key", key, who, ctx.env->control().ClientLine(ctx.client),
                             kAclLogMulti);
        }
        stats.CountError(ctx.reply->last_error_code());
        continue;
      }
    }
    const uint64_t before = ctx.reply->error_count();
    const uint64_t start = MonotonicUs();
    q.spec->handler(sub);
    const uint64_t usec = MonotonicUs() - start;
    const bool failed = ctx.reply->error_count() != before;
    stats.Record(table.StatIndex(q.spec, views), usec, failed,
                 ctx.env->observability().latency_tracking());
    if (failed) stats.CountError(ctx.reply->last_error_code());
    ctx.env->observability().AfterCommand(views, *q.spec, usec, *ctx.client);
    ctx.env->TrackCommand(views, *q.spec, *ctx.client, failed);
    ctx.wait_lsn = std::max(ctx.wait_lsn, sub.wait_lsn);
  }
  ctx.inner_errors = ctx.reply->error_count() - errors_before;
}

void Watch(CommandContext& ctx) {
  TxState& tx = TxFor(ctx.client);
  if (tx.in_multi) {
    ctx.reply->Error(kErrWatchInMulti);
    return;
  }
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    std::string key(ctx.args[i]);
    bool seen = std::any_of(tx.watched.begin(), tx.watched.end(),
                            [&](const auto& w) { return w.first == key; });
    if (!seen) tx.watched.emplace_back(key, VersionOf(*ctx.env, key));
  }
  ctx.reply->SimpleString("OK");
}

void Unwatch(CommandContext& ctx) {
  if (TxState* tx = TxOf(ctx.client)) tx->watched.clear();
  ctx.reply->SimpleString("OK");
}

}  // namespace

bool IsExec(const CommandSpec* spec) { return spec->handler == Exec; }

void AddTransactionCommands(std::vector<CommandSpec>* out) {
  constexpr uint32_t kTx = kCmdTxControl | kCmdFast | kCmdLoading | kCmdStale;
  out->push_back(
      {"MULTI", 1, kTx, 0, 0, 0, Multi, "Starts a transaction.", "transactions", "1.2.0", ""});
  out->push_back({"EXEC", 1, kTx, 0, 0, 0, Exec, "Runs the queued commands atomically.",
                  "transactions", "1.2.0", ""});
  out->push_back({"DISCARD", 1, kTx, 0, 0, 0, Discard, "Drops the queued commands.", "transactions",
                  "2.0.0", ""});
  out->push_back({"WATCH", -2, kTx, 1, -1, 1, Watch,
                  "EXEC fails if one of these keys changes before it.", "transactions", "2.2.0",
                  "key..."});
  // As Redis 7.0, UNWATCH inside MULTI is queued like any command: the watch
  // still decides EXEC (and EXEC forgets every watched key anyway).
  out->push_back({"UNWATCH", 1, kTx & ~kCmdTxControl, 0, 0, 0, Unwatch,
                  "Forgets every watched key.", "transactions", "2.2.0", ""});
  for (size_t i = out->size() - 5; i < out->size(); ++i)
    (*out)[i].acl_categories |= kAclTransaction;
  out->at(out->size() - 2).acl_key_flags |= kAclKeyReadOnly;  // WATCH
}

}  // namespace pion::server
