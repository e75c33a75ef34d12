// CommandService: the server as the network layer's Service (net/service.h).
// Dispatch admits a request (dispatch.h), runs its handler with a
// CommandContext and returns the handler's wait_lsn as the hold-until ticket;
// limits, the client-memory budget and the client registry come from Server.
//
// Thread-safety: as Server (called on every worker thread).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "server/net_types.h"

namespace pion::server {

class Server;
struct AclUser;
struct CommandSpec;

class CommandService final : public net::Service {
 public:
  explicit CommandService(Server* server) : server_(server) {}

  uint64_t Dispatch(std::span<const std::string_view> args, ReplyBuilder& reply,
                    net::ConnContext& ctx) override;
  // A fast-lane frame: dispatched as its RESP twin (server/fastlane.h).
  uint64_t DispatchFrame(const net::Frame& frame, ReplyBuilder& reply,
                         net::ConnContext& ctx) override;
  // CLIENT PAUSE: a write (an EXEC of a transaction holding one; PUBLISH,
  // which Redis replicates) under a WRITE pause, any command under an ALL
  // pause, waits; asked again every 10 ms at most (UNPAUSE is seen that soon).
  uint64_t PostponeMs(std::span<const std::string_view> args, const net::ConnContext& ctx) override;
  uint64_t durable_lsn() const override;
  ParserLimits parser_limits() const override;
  bool auth_required() const override;
  uint64_t query_buffer_limit() const override;
  uint64_t output_limit() const override;
  uint64_t output_soft_limit() const override;
  uint64_t output_soft_seconds() const override;
  uint64_t output_check_threshold() const override;
  OutputLimits pubsub_output_limits() const override;
  bool ReserveClientMemory(uint64_t n, const ClientInfo* who) override;
  void AdjustClientMemory(int64_t delta) override;
  void OnOpen(ClientInfo* info) override;
  void OnClose(ClientInfo* info) override;
  // Inside a batch the exec lock is taken shared by the first command and kept
  // until EndBatch (two locked read-modify-writes per batch, not per command);
  // a kCmdTxControl command (EXEC takes the lock exclusively) releases it
  // first. Outside a batch (tests that call Dispatch) it is taken per command.
  void BeginBatch() override;
  void EndBatch() override;

 private:
  // The ACL check for a restricted user (replies and logs a denial).
  bool CheckAcl(const AclUser* user, const CommandSpec& spec,
                std::span<const std::string_view> args, net::ConnContext& c, ReplyBuilder& reply);

  Server* server_;
};

}  // namespace pion::server
