#include "server/command_service.h"

#include <mutex>
#include <shared_mutex>

#include "base/check.h"
#include "server/commands/dispatch.h"
#include "server/fastlane.h"
#include "server/commands/transaction.h"
#include "server/server.h"

namespace pion::server {

uint64_t CommandService::Dispatch(std::span<const std::string_view> args, ReplyBuilder& reply,
                                  net::ConnContext& c) {
  const CommandSpec* spec = AdmitCommand(*server_, args, c.authenticated, &reply);
  TxState* tx = TxOf(c.info);
  if (spec == nullptr) {
    if (tx != nullptr && tx->in_multi) tx->dirty = true;  // EXEC answers EXECABORT
    return 0;
  }
  c.info->last_cmd.store(spec->name, std::memory_order_relaxed);
  CommandContext ctx;
  ctx.args = args;
  ctx.reply = &reply;
  ctx.server = server_;
  ctx.client = c.info;
  if (spec->flags & kCmdTxControl) {
    spec->handler(ctx);  // EXEC takes the exec lock itself
  } else if (tx != nullptr && tx->in_multi) {
    TxQueue(ctx, spec, *tx);
  } else {
    // Shared: no transaction of another client runs meanwhile (transaction.h).
    std::shared_lock<std::shared_mutex> l(server_->exec_mu());
    spec->handler(ctx);
  }
  return ctx.wait_lsn;
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

uint64_t CommandService::durable_lsn() const { return server_->durability().durable_lsn(); }

ParserLimits CommandService::parser_limits() const {
  const Config& cfg = server_->config();
  ParserLimits lim;
  lim.max_bulk_len = cfg.proto_max_bulk_len;
  lim.max_args = cfg.max_multibulk_len;
  lim.max_query_bytes = cfg.client_query_buffer_limit;
  lim.max_frame_body = cfg.fastlane_max_frame_len;
  return lim;
}

bool CommandService::auth_required() const { return !server_->config().requirepass.empty(); }

uint64_t CommandService::query_buffer_limit() const {
  return server_->config().client_query_buffer_limit;
}

uint64_t CommandService::output_limit() const { return server_->output_limit(); }
uint64_t CommandService::output_soft_limit() const { return server_->output_soft_limit(); }
uint64_t CommandService::output_soft_seconds() const { return server_->output_soft_seconds(); }
uint64_t CommandService::output_check_threshold() const {
  return server_->output_check_threshold();
}

bool CommandService::ReserveClientMemory(uint64_t n) { return server_->ReserveClientMemory(n); }
void CommandService::AdjustClientMemory(int64_t delta) { server_->clients().AdjustMemory(delta); }

void CommandService::OnOpen(ClientInfo* info) { server_->clients().Register(info); }

void CommandService::OnClose(ClientInfo* info) {
  TxFree(info);
  server_->clients().Unregister(info);
  server_->clients().ReleaseSlot();
}

std::shared_ptr<DeferredReply> CommandContext::Defer() {
  PION_CHECK(CanDefer());
  deferred = true;
  return client->control->BeginDeferred();
}

}  // namespace pion::server
