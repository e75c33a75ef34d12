#include "server/command_service.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "base/check.h"
#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/commands/transaction.h"
#include "server/dispatch.h"
#include "server/fastlane.h"
#include "server/kv_events.h"
#include "server/server.h"
#include "store/store.h"

namespace pion::server {

namespace {
// The calling thread's batch (BeginBatch depth) and the exec lock it holds
// shared, if any (thread-local: one CommandService serves every worker).
thread_local int tls_batch_depth = 0;
thread_local WriterFirstMutex* tls_exec_held = nullptr;

// The exec lock is held across a batch, from the first command that needs it
// to EndBatch: a pattern the thread-safety analysis cannot follow (a lock taken
// in one call and released in another, through a thread_local), so these two
// are not analysed. Replacing it (a per-key or per-shard scheme for
// MULTI/EXEC) is the way to a checked exec lock.
void HoldExecSharedForBatch(WriterFirstMutex& mu) NO_THREAD_SAFETY_ANALYSIS {
  if (tls_exec_held == nullptr) {
    mu.lock_shared();
    tls_exec_held = &mu;
  }
}

void ReleaseExecHeld() NO_THREAD_SAFETY_ANALYSIS {
  if (tls_exec_held != nullptr) {
    tls_exec_held->unlock_shared();
    tls_exec_held = nullptr;
  }
}

// Store::OutOfMemory under the exec lock held shared (as a handler runs: an
// eviction never lands inside another client's EXEC); kept for the batch.
bool OutOfMemory(Server& server, uint64_t* lsn) {
  *lsn = 0;
  store::Store* st = server.store();
  if (st == nullptr || server.settings().maxmemory() == 0) return false;
  if (tls_batch_depth > 0) {
    HoldExecSharedForBatch(server.exec_mu());
    return st->OutOfMemory(lsn);
  }
  std::shared_lock<WriterFirstMutex> l(server.exec_mu());
  return st->OutOfMemory(lsn);
}
}  // namespace

void CommandService::BeginBatch() { ++tls_batch_depth; }

void CommandService::EndBatch() {
  if (--tls_batch_depth == 0) {
    ReleaseExecHeld();
    KvEvents::CommandDone();  // a worker's loop batches KV events (kv_events.h)
  }
}

uint64_t CommandService::Dispatch(std::span<const std::string_view> args, ReplyBuilder& reply,
                                  net::ConnContext& c) {
  const CommandTable& table = server_->commands();
  // Counted per worker (INFO commandstats/errorstats): no shared cache line.
  CommandStats& stats = server_->cmdstats_of(c.info->worker);
  uint64_t errors = reply.error_count();
  const CommandSpec* spec = AdmitCommand(*server_, args, c.authenticated, &reply);
  TxState* tx = TxOf(c.info);
  if (spec == nullptr) {
    if (tx != nullptr && tx->in_multi) tx->dirty = true;  // EXEC answers EXECABORT
    // Refused before it ran (arity, NOAUTH, LOADING...): rejected_calls.
    if (const CommandSpec* known = table.Find(args[0])) stats.Reject(table.StatIndex(known, args));
    if (reply.error_count() != errors) stats.CountError(reply.last_error_code());
    return 0;
  }
  // ACL: one epoch load and one flag test for an unrestricted user (the
  // default user); AUTH, HELLO, QUIT and RESET are open to everyone.
  if (!(spec->flags & kCmdNoAuth)) {
    const AclUser* user = server_->ClientUser(c.info);
    if (user == nullptr || !user->unrestricted) {
      if (!CheckAcl(user, *spec, args, c, reply)) {
        if (tx != nullptr && tx->in_multi) tx->dirty = true;  // as Redis: EXEC aborts
        stats.Reject(table.StatIndex(spec, args));
        stats.CountError(reply.last_error_code());
        return 0;
      }
    }
  }
  size_t slot = table.StatIndex(spec, args);
  if (tx != nullptr && tx->in_multi) {
    // As Redis under memory pressure: nothing more is queued (the transaction
    // is marked, EXEC answers EXECABORT) and EXEC of a transaction holding a
    // write that may use memory runs nothing; DISCARD, QUIT and RESET pass.
    const bool queue = !(spec->flags & kCmdTxControl);
    uint64_t lsn = 0;
    if ((queue || (tx->denyoom && IsExec(spec))) && OutOfMemory(*server_, &lsn)) {
      if (queue) {
        tx->dirty = true;
        reply.Error(kErrOom);
      } else {
        tx->Reset();
        reply.Error(kErrExecAbortOom);
        server_->observability().MonitorCommand(args, *spec,
                                                *c.info);  // as Redis: the MULTI gets its EXEC
      }
      stats.Reject(slot);
      stats.CountError(reply.last_error_code());
      return lsn;
    }
  }
  // RESP2 subscribed mode: only the subscribe family, PING, QUIT and RESET.
  if (c.info->pubsub.load(std::memory_order_relaxed) && !(spec->flags & kCmdPubSubContext) &&
      c.conn->proto() == 2) [[unlikely]] {
    if (tx != nullptr && tx->in_multi) tx->dirty = true;
    reply.Error(PubSubContextError(table.stat_name(slot)));
    stats.Reject(slot);
    stats.CountError(reply.last_error_code());
    return 0;
  }
  c.info->last_cmd.store(table.stat_name(slot).c_str(), std::memory_order_relaxed);
  CommandContext ctx;
  ctx.args = args;
  ctx.reply = &reply;
  ctx.env = &server_->env();
  ctx.client = c.info;
  if (!(spec->flags & kCmdTxControl) && tx != nullptr && tx->in_multi) {
    // Queued: counted when it runs (EXEC), refused (kCmdNoMulti) as rejected.
    TxQueue(ctx, spec, *tx);
    if (reply.error_count() != errors) {
      stats.Reject(slot);
      stats.CountError(reply.last_error_code());
    }
    return 0;
  }
  uint64_t start = MonotonicUs();
  const bool tracking = server_->tracking().armed();
  if (tracking) Tracking::BeginCommand();  // BCAST keys are sent when it ends
  if (spec->flags & kCmdTxControl) {
    ReleaseExecHeld();  // EXEC takes the exec lock itself (exclusively)
    spec->handler(ctx);
  } else if (tls_batch_depth > 0) {
    // Shared: no transaction of another client runs meanwhile (transaction.h);
    // kept until the batch ends.
    HoldExecSharedForBatch(server_->exec_mu());
    spec->handler(ctx);
  } else {
    std::shared_lock<WriterFirstMutex> l(server_->exec_mu());
    spec->handler(ctx);
  }
  uint64_t usec = MonotonicUs() - start;
  bool failed = reply.error_count() - ctx.inner_errors != errors;
  if (failed && (spec->flags & kCmdDenyOom) && reply.last_error_code() == "OOM") {
    // Refused for memory with nothing changed: Redis refuses it before it
    // runs and counts it as rejected, not as a call.
    stats.Reject(slot);
  } else {
    stats.Record(slot, usec, failed, server_->observability().latency_tracking());
  }
  if (failed) stats.CountError(reply.last_error_code());
  server_->observability().AfterCommand(args, *spec, usec, *c.info);
  server_->TrackCommand(args, *spec, *c.info, failed);
  if (tracking) server_->tracking().EndCommand();
  // CLIENT CACHING yes|no applies to the next command only (kept by a CLIENT
  // command and inside MULTI, as Redis).
  if (c.info->tracking.load(std::memory_order_relaxed) & kTrackCaching) [[unlikely]] {
    const TxState* now = TxOf(c.info);
    if ((now == nullptr || !now->in_multi) && std::string_view(spec->name) != "CLIENT")
      c.info->tracking.fetch_and(~static_cast<uint32_t>(kTrackCaching), std::memory_order_relaxed);
  }
  if (tls_batch_depth == 0) KvEvents::CommandDone();  // not in a batch: now
  return ctx.wait_lsn;
}

uint64_t CommandService::PostponeMs(std::span<const std::string_view> args,
                                    const net::ConnContext& c) {
  const int64_t end = server_->client_pause().end_ms();
  if (end == 0) [[likely]]
    return 0;
  const int64_t now = UnixMillis();
  if (now >= end) return 0;  // over
  const CommandSpec* spec = server_->commands().Find(args[0]);
  // Refused anyway (unknown, or before AUTH): not held.
  if (spec == nullptr || (!c.authenticated && !(spec->flags & kCmdNoAuth))) return 0;
  if (!server_->client_pause().all()) {
    bool write = (spec->flags & kCmdWrite) != 0;
    const std::string_view name = spec->name;
    if (name == "PUBLISH" || name == "SPUBLISH") write = true;  // Redis's may-replicate
    if (IsExec(spec)) {
      const TxState* tx = TxOf(c.info);
      write = false;
      if (tx != nullptr && tx->in_multi)
        for (const TxState::Queued& q : tx->queued) write = write || (q.spec->flags & kCmdWrite);
    }
    if (!write) return 0;
  }
  return static_cast<uint64_t>(std::min<int64_t>(end - now, 10));
}

uint64_t CommandService::DispatchFrame(const net::Frame& frame, ReplyBuilder& reply,
                                       net::ConnContext& c) {
  LaneRequest req;
  std::string error;
  if (!FrameToRequest(frame, &req, &error)) {
    reply.Error(error);
    c.conn->CloseAfterReply();
    return 0;
  }
  return Dispatch(req.args(), reply, c);
}

bool CommandService::CheckAcl(const AclUser* user, const CommandSpec& spec,
                              std::span<const std::string_view> args, net::ConnContext& c,
                              ReplyBuilder& reply) {
  if (user == nullptr) {
    // The user this client authenticated as was deleted (ACL DELUSER / LOAD):
    // nothing is allowed; the client is being closed.
    reply.Error(NoPermCommandError(spec.name));
    c.conn->CloseAfterReply();
    return false;
  }
  std::string_view key;
  size_t index = static_cast<size_t>(&spec - server_->commands().specs().data());
  AclDenial d = Acl::Check(*user, spec, index, args, &key);
  if (d == AclDenial::kNone) return true;
  // ACL LOG's context, as Redis: "multi" while the client is queueing a MULTI.
  const TxState* tx = TxOf(c.info);
  const std::string_view where = tx != nullptr && tx->in_multi ? kAclLogMulti : kAclLogTopLevel;
  if (d == AclDenial::kCommand) {
    // As Redis: a subcommand is named in full ("config|set").
    const CommandTable& table = server_->commands();
    const std::string& name = table.stat_name(table.StatIndex(&spec, args));
    reply.Error(NoPermCommandError(name));
    server_->acl().Log("command", name, user->name, server_->ClientLine(c.info), where);
  } else if (d == AclDenial::kChannel) {
    reply.Error(kErrNoPermChannel);
    server_->acl().Log("channel", key, user->name, server_->ClientLine(c.info), where);
  } else {
    reply.Error(kErrNoPermKey);
    server_->acl().Log("key", key, user->name, server_->ClientLine(c.info), where);
  }
  return false;
}

uint64_t CommandService::durable_lsn() const { return server_->durability().durable_lsn(); }

ParserLimits CommandService::parser_limits() const {
  const Config& cfg = server_->config();
  ParserLimits lim;
  lim.max_bulk_len = cfg.proto_max_bulk_len;
  lim.max_args = cfg.max_multibulk_len;
  lim.max_query_bytes = server_->settings().query_buffer_limit();
  lim.max_frame_body = cfg.fastlane_max_frame_len;
  return lim;
}

bool CommandService::auth_required() const { return !server_->default_user_open(); }

uint64_t CommandService::query_buffer_limit() const {
  return server_->settings().query_buffer_limit();
}

uint64_t CommandService::output_limit() const { return server_->settings().output_limit(); }
uint64_t CommandService::output_soft_limit() const {
  return server_->settings().output_soft_limit();
}
uint64_t CommandService::output_soft_seconds() const {
  return server_->settings().output_soft_seconds();
}
net::Service::OutputLimits CommandService::pubsub_output_limits() const {
  return server_->settings().pubsub_output_limits();
}
uint64_t CommandService::output_check_threshold() const {
  return server_->settings().output_check_threshold();
}

bool CommandService::ReserveClientMemory(uint64_t n, const ClientInfo* who) {
  return server_->client_eviction().Reserve(n, who);
}
void CommandService::AdjustClientMemory(int64_t delta) { server_->client_eviction().Adjust(delta); }

void CommandService::OnOpen(ClientInfo* info) {
  server_->clients().Register(info);
  server_->SetClientUser(info, server_->acl().Default());
}

void CommandService::OnClose(ClientInfo* info) {
  TxFree(info);
  server_->tracking().Disable(info);
  server_->clients().Unregister(info);
  server_->observability().RemoveMonitor(info);
  server_->PubSubRemoveClient(info);
  server_->clients().ReleaseSlot();
}

std::shared_ptr<DeferredReply> CommandContext::Defer() {
  PION_CHECK(CanDefer());
  deferred = true;
  return client->control->BeginDeferred();
}

}  // namespace pion::server
