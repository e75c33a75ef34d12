// CommandEnv: what a command handler works with (CommandContext::env). The
// server's components (the store, the ACL, the client registry, CLIENT PAUSE,
// client eviction, Pub/Sub, tracking, observability, the settings, the
// durability gate, the background runner, snapshots, the memory figures, the
// attention cache and pool, the command table) as plain pointers, the value
// receipt and the notify-keyspace-events flags (held here), and ServerControl
// for the few operations that span the whole server (users and closing
// clients, CONFIG SET, SHUTDOWN, the summed statistics).
// The Server builds one and owns it; it outlives every command. A handler never
// sees the Server, its workers or its sockets: the command layer includes this
// header, never server/server.h or net/connection.h (both refuse to compile
// under PION_COMMAND_LAYER, src/server/CMakeLists.txt).
//
// Speed: the accessors and the hot helpers (ClientUser, NotifyKeyspaceEvent,
// NotifyWanted, TrackCommand) are inline and reach their component in one load,
// as they did through the Server; only ServerControl's methods are virtual, and
// the hot helpers call it only off their fast path.
//
// Thread-safety: as the Server's (server.h): any worker thread unless a comment
// says otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/rw_mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "kvproto/receipt.h"
#include "server/acl.h"
#include "server/attention.h"
#include "server/client_eviction.h"
#include "server/client_pause.h"
#include "server/client_registry.h"
#include "server/command_stats.h"
#include "server/commands/command_table.h"
#include "server/config.h"
#include "server/durability_gate.h"
#include "server/memory_gauge.h"
#include "server/notify.h"
#include "server/observability.h"
#include "server/pubsub.h"
#include "server/runtime_settings.h"
#include "server/save_scheduler.h"
#include "server/task_runner.h"
#include "server/tracking.h"
#include "store/store.h"

namespace pion::persist {
class Persistence;
}  // namespace pion::persist

namespace pion::server {
class KvEvents;

// Server-wide counters (INFO stats), summed over the workers' own copies.
struct ServerStats {
  uint64_t connections_received = 0;
  uint64_t commands_processed = 0;
  uint64_t net_input_bytes = 0;
  uint64_t net_output_bytes = 0;
  uint64_t rejected_connections = 0;
  uint64_t output_limit_disconnections = 0;
  uint64_t protocol_errors = 0;
  uint64_t tls_handshake_failures = 0;
  uint64_t error_replies = 0;
};

// The operations of the whole server that commands use (the Server implements
// them; server.h documents each). Admin commands only: none is on the path of
// GET, SET or the KV.* data commands.
class ServerControl {
 public:
  // Clients and users.
  virtual bool default_user_open() const = 0;
  virtual const AclUser* RefreshClientUser(ClientInfo* c) = 0;
  virtual void SetClientUser(ClientInfo* c, std::shared_ptr<const AclUser> u) = 0;
  virtual std::string ClientUserName(const ClientInfo* c) = 0;
  virtual std::string ClientLine(const ClientInfo* c) = 0;
  virtual void KillClientsOfUsers(const std::vector<std::string>& names) = 0;
  virtual void KillPubSubClientsOfUsers() = 0;
  virtual bool KillClient(uint64_t id) = 0;
  virtual void DeliverQueuedPushes(int w) = 0;
  virtual void PubSubRemoveClient(ClientInfo* c) = 0;

  // The process.
  virtual bool loading() const = 0;
  virtual uint64_t start_time_us() const = 0;
  virtual int port() const = 0;
  virtual int fastlane_port() const = 0;
  virtual int num_workers() const = 0;
  virtual const std::string& run_id() const = 0;
  virtual const std::string& replid() const = 0;
  virtual void RequestShutdown() = 0;
  virtual Config ConfigSnapshot() const = 0;
  virtual Status SetConfig(const std::vector<std::pair<std::string, std::string>>& pairs,
                           uint64_t* lsn) = 0;

  // Statistics.
  virtual ServerStats Stats() const = 0;
  virtual void ResetStats() = 0;
  virtual std::vector<CommandCounters> CommandCountersAll() const = 0;
  virtual CommandStats& cmdstats_of(int w) = 0;
  virtual std::map<std::string, uint64_t> ErrorCounts() const = 0;
  virtual std::vector<TrackHist> TrackedLatencyAll() const = 0;

  // The slow paths of CommandEnv's inline helpers.
  virtual void NotifyKeyspaceEventSlow(uint32_t flags, std::string_view event,
                                       std::string_view key) = 0;
  virtual void TrackCommandSlow(std::span<const std::string_view> args, const CommandSpec& spec,
                                const ClientInfo& client, bool failed) = 0;

 protected:
  ~ServerControl() = default;
};

class CommandEnv {
 public:
  CommandEnv() = default;
  CommandEnv(const CommandEnv&) = delete;
  CommandEnv& operator=(const CommandEnv&) = delete;

  ServerControl& control() { return *control_; }
  // The values given at start-up (CONFIG SET keeps the run-time ones in step;
  // read those through settings() or control().ConfigSnapshot()).
  const Config& config() const { return *config_; }
  // The settings CONFIG SET changes at run time (lock-free reads).
  const RuntimeSettings& settings() const { return *settings_; }
  // nullptr without --kvcache.
  store::Store* store() { return store_; }
  Receipt& receipt() { return receipt_; }
  const CommandTable& commands() const { return *commands_; }
  Acl& acl() { return *acl_; }
  ClientRegistry& clients() { return *clients_; }
  PubSub& pubsub() { return *pubsub_; }
  Tracking& tracking() { return *tracking_; }
  Observability& observability() { return *observability_; }
  DurabilityGate& durability() { return *durability_; }
  TaskRunner& background() { return *background_; }
  // Held shared by every command, exclusively by EXEC (server.h).
  WriterFirstMutex& exec_mu() { return *exec_mu_; }
  // The durability layer; nullptr without --kvcache or with appendonly no.
  persist::Persistence* persistence() const { return persistence_; }
  // KV events (server/kv_events.h), or null when off.
  KvEvents* kv_events() const { return kv_events_; }
  // Stage 2: the slot cache, the compute pool and their settings
  // (server/attention.h).
  Attention& attention() { return *attention_; }
  // The memory figures (server/memory_gauge.h).
  MemoryGauge& memory() { return *memory_; }
  // Snapshots, one at a time, and the save points (server/save_scheduler.h).
  SaveScheduler& saves() { return *saves_; }
  // CLIENT PAUSE / UNPAUSE (server/client_pause.h).
  ClientPause& client_pause() { return *client_pause_; }
  // maxmemory-clients (server/client_eviction.h).
  ClientEviction& client_eviction() { return *client_eviction_; }

  // The user a client is authenticated as: its cached user, refreshed when
  // the ACL changed since (nullptr once that user was deleted). Owning thread.
  const AclUser* ClientUser(ClientInfo* c) {
    if (c->principal_epoch == acl_->epoch()) [[likely]]
      return static_cast<const AclUser*>(c->principal.get());
    return control_->RefreshClientUser(c);
  }

  // Keyspace notifications (server/notify.h): publishes `event` for `key` when
  // notify-keyspace-events enables `type` and someone could hear it (two
  // relaxed loads otherwise). Any thread.
  void NotifyKeyspaceEvent(uint32_t type, std::string_view event, std::string_view key) {
    uint32_t f = notify_flags();
    if ((f & type) && (f & (kNotifyKeyspace | kNotifyKeyevent)) && pubsub_->key_listeners())
      control_->NotifyKeyspaceEventSlow(f, event, key);
  }
  uint32_t notify_flags() const { return notify_flags_.load(std::memory_order_relaxed); }
  // Whether an event of class `type` would be published now (for an event
  // that needs extra work to detect, such as whether a key is new).
  bool NotifyWanted(uint32_t type) const {
    uint32_t f = notify_flags();
    return (f & type) && (f & (kNotifyKeyspace | kNotifyKeyevent)) && pubsub_->key_listeners();
  }

  // After a command ran: a tracking client's read keys are remembered, a
  // successful write's keys invalidated. One relaxed load while nobody tracks.
  void TrackCommand(std::span<const std::string_view> args, const CommandSpec& spec,
                    const ClientInfo& client, bool failed) {
    if (tracking_->armed()) control_->TrackCommandSlow(args, spec, client, failed);
  }

 private:
  // The Server fills these in (its constructor, SetPersistence, set_kv_events,
  // CONFIG SET for notify_flags_); nothing else changes them.
  friend class Server;
  ServerControl* control_ = nullptr;
  const Config* config_ = nullptr;
  const RuntimeSettings* settings_ = nullptr;
  store::Store* store_ = nullptr;
  const CommandTable* commands_ = nullptr;
  Acl* acl_ = nullptr;
  ClientRegistry* clients_ = nullptr;
  PubSub* pubsub_ = nullptr;
  Tracking* tracking_ = nullptr;
  Observability* observability_ = nullptr;
  DurabilityGate* durability_ = nullptr;
  TaskRunner* background_ = nullptr;
  WriterFirstMutex* exec_mu_ = nullptr;
  persist::Persistence* persistence_ = nullptr;
  KvEvents* kv_events_ = nullptr;
  Attention* attention_ = nullptr;
  MemoryGauge* memory_ = nullptr;
  SaveScheduler* saves_ = nullptr;
  ClientPause* client_pause_ = nullptr;
  ClientEviction* client_eviction_ = nullptr;
  // Held here rather than pointed to, so that the hot commands reach them in
  // one load as they did through the Server: the value receipt (KV.PREFIX.LOOKUP,
  // V.*) and notify-keyspace-events as flags (CONFIG SET stores them).
  Receipt receipt_;
  std::atomic<uint32_t> notify_flags_{0};
};

}  // namespace pion::server
