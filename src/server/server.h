// Server: process orchestration, the composition of the server's parts. It
// owns, each as a typed member: the config, the store (only with --kvcache),
// the command table, the ACL, the run-time settings (runtime_settings.h), the
// client registry (client_registry.h), CLIENT PAUSE (client_pause.h), client
// eviction (client_eviction.h), the durability gate (durability_gate.h), the
// background task runner, snapshots and save points (save_scheduler.h), the
// listening sockets and the TLS context (listeners.h), Pub/Sub, tracking, the
// observability of commands (observability.h: slow log, latency monitor,
// MONITOR, rates), the memory figures (memory_gauge.h), the attention cache and
// pool, and the workers; and a pointer to the durability layer (persistence()).
// What is its own: start-up and shutdown (Start, Serve, StopWorkers), CONFIG
// SET across the parts, and the ServerControl operations that span them.
// Handlers never see it: they get its CommandEnv (server/command_env.h: the
// components, and the Server itself as ServerControl for the operations that
// span it) through CommandContext::env (no globals). The command layer may not
// include this header (the #error below).
//
// Thread-safety: everything here may be used from any worker thread unless a
// comment says otherwise. Settings that CONFIG SET can change at run time are
// read through settings() (server/runtime_settings.h: relaxed atomics, no
// lock); config() holds the values given at start-up and CONFIG SET keeps it
// in step under config_mu_ for CONFIG GET.
//
// Durability (deferred replies): a handler that changed state sets
// ctx.wait_lsn to the LSN its change was logged at and the reply is held until
// durability().durable_lsn() reaches it; the persistence layer reports
// progress with durability().NotifyDurable(lsn) (see durability_gate.h).
//
// Background work (replies completed later). Work that must not block a worker
// (KV.PREFIX.SAVE's snapshot, COMMIT's fsync) runs on background(), a small
// fixed TaskRunner; the handler took a DeferredReply (ctx.Defer()) and the task
// completes it. Shutdown stops reading first, then lets background() finish
// what is queued (a running SAVE completes and its reply is sent), then flushes
// the log and closes the clients.
#pragma once

#ifdef PION_COMMAND_LAYER
#error "server/server.h in the command layer: a handler uses CommandEnv (server/command_env.h)"
#endif

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/rw_mutex.h"
#include "base/thread_annotations.h"
#include "kvproto/receipt.h"
#include "net/tls.h"
#include "server/acl.h"
#include "server/client_eviction.h"
#include "server/client_pause.h"
#include "server/client_registry.h"
#include "server/command_env.h"
#include "server/command_stats.h"
#include "server/commands/command_table.h"
#include "server/config.h"
#include "server/durability_gate.h"
#include "server/listeners.h"
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

class Worker;
class CommandService;

class Server final : public ServerControl, private PushSink {
 public:
  explicit Server(Config cfg);
  // With commands added to the standard table (tests, embedding).
  Server(Config cfg, std::vector<CommandSpec> extra_commands);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const Config& config() const { return cfg_; }
  Config& mutable_config() { return cfg_; }
  // nullptr without --kvcache.
  // KV events (server/kv_events.h), or null when off. Set before Start().
  void set_kv_events(KvEvents* e) { env_.kv_events_ = e; }
  KvEvents* kv_events() const { return env_.kv_events_; }
  store::Store* store() { return store_.get(); }
  Receipt& receipt() { return env_.receipt(); }
  bool loading() const override { return loading_.load(std::memory_order_acquire); }
  void set_loading(bool v) { loading_.store(v, std::memory_order_release); }
  uint64_t start_time_us() const override { return start_time_us_; }
  const CommandTable& commands() const { return commands_; }
  // What command handlers work with (CommandContext::env).
  CommandEnv& env() { return env_; }
  // Users and permissions (server/acl.h).
  Acl& acl() { return acl_; }
  // Whether the default user needs no password (new connections start
  // authenticated as it).
  bool default_user_open() const override;
  // The user a client is authenticated as: its cached user, refreshed when
  // the ACL changed since (nullptr once that user was deleted). Owning thread.
  const AclUser* ClientUser(ClientInfo* c) {
    if (c->principal_epoch == acl_.epoch()) [[likely]]
      return static_cast<const AclUser*>(c->principal.get());
    return RefreshClientUser(c);
  }
  const AclUser* RefreshClientUser(ClientInfo* c) override;
  void SetClientUser(ClientInfo* c, std::shared_ptr<const AclUser> u) override;
  std::string ClientUserName(const ClientInfo* c) override;
  // The client's CLIENT LIST line (for ACL LOG).
  std::string ClientLine(const ClientInfo* c) override;
  // Closes every client authenticated as one of `names` (ACL DELUSER, LOAD).
  void KillClientsOfUsers(const std::vector<std::string>& names) override;
  // After ACL SETUSER / LOAD: closes every client subscribed to a channel or
  // pattern its user may no longer use (as Redis 7.0 does).
  void KillPubSubClientsOfUsers() override;
  // CLIENT PAUSE / UNPAUSE (server/client_pause.h).
  ClientPause& client_pause() { return client_pause_; }
  // Applies the `user` config lines, --aclfile and --requirepass (Start()).
  Status InitAcl();
  // The disk tier (tier-dir), attached before recovery fills the store.
  Status AttachTier();
  // What the workers' connections serve (net::Service).
  net::Service* service();

  // Binds the listening sockets (RESP; the fast lane with --kvcache) and starts
  // the workers.
  Status Start();
  // Blocks until SIGTERM/SIGINT arrives on `signal_fd` (a signalfd; -1 for
  // none) or a SHUTDOWN command, then shuts down gracefully: stop accepting,
  // stop reading, flush the log (hook), send what is queued, close, join the
  // workers. Returns the process exit code.
  int Serve(int signal_fd);
  // Asks Serve() to shut down (thread-safe; SHUTDOWN calls it).
  void RequestShutdown() override;
  int NextWorker() {
    return static_cast<int>(next_worker_.fetch_add(1, std::memory_order_relaxed) % workers_.size());
  }
  bool shutting_down() const { return shutting_down_.load(std::memory_order_acquire); }

  // The listening sockets, their bound ports and the TLS context
  // (server/listeners.h).
  const Listeners& listeners() const { return listeners_; }
  // The TCP port actually bound (differs from config().port when that is 0).
  int port() const override { return listeners_.port(); }
  // The fast lane's bound port, 0 when it is off (also config().fastlane_port
  // once started).
  int fastlane_port() const override { return listeners_.fastlane_port(); }
  int num_workers() const override { return static_cast<int>(workers_.size()); }
  Worker* worker(int i) { return workers_[i].get(); }
  const std::string& run_id() const override { return run_id_; }

  // The settings CONFIG SET changes at run time, readable from any thread
  // without a lock (server/runtime_settings.h).
  const RuntimeSettings& settings() const { return settings_; }
  // protected-mode yes and no requirepass: only loopback peers are served.
  bool protected_mode() const { return cfg_.protected_mode && default_user_open(); }
  // A copy of the current configuration (CONFIG GET).
  Config ConfigSnapshot() const EXCLUDES(config_mu_) override;
  // CONFIG SET: validates every pair, then applies them all or none. `*lsn`
  // gets the log position of any eviction it caused. Errors are reply texts.
  Status SetConfig(const std::vector<std::pair<std::string, std::string>>& pairs, uint64_t* lsn)
      EXCLUDES(config_mu_) override;

  // Durability: the acknowledged LSN and the workers' held replies.
  DurabilityGate& durability() { return durability_; }
  // The durability layer (server/persist_glue.h; owned by main), set before
  // Start(): KV.PREFIX.SAVE / COMMIT, INFO persistence, SHUTDOWN SAVE, the
  // flush at exit, CONFIG SET appendfsync. nullptr without --kvcache or with
  // appendonly no.
  void SetPersistence(persist::Persistence* p) {
    env_.persistence_ = p;
    saves_.set_persistence(p);
  }
  persist::Persistence* persistence() const { return env_.persistence_; }

  // Background tasks (see the file comment). Post() fails once shutting down.
  TaskRunner& background() { return background_; }
  // Snapshots, one at a time, and the save points (server/save_scheduler.h).
  SaveScheduler& saves() { return saves_; }
  // Save points: worker 0 calls it every 100 ms; nothing is due while loading.
  void SavePointsCron() {
    if (!loading()) saves_.SavePointsCron();
  }

  // The connected clients, their slots and their buffers' memory.
  ClientRegistry& clients() { return clients_; }
  // Held shared by every command (once per read batch), exclusively by EXEC
  // (commands/transaction.h); a waiting EXEC holds off new batches (base/rw_mutex.h).
  WriterFirstMutex& exec_mu() RETURN_CAPABILITY(exec_mu_) { return exec_mu_; }
  // Asks the owning worker to close client `id`, which CLIENT LIST and the
  // other registry readers leave out from now on; false if there is none (or it
  // is already closing).
  bool KillClient(uint64_t id) override;
  // The same for a client PickEvictions already marked as closing.
  bool ClosePickedClient(uint64_t id);
  // Connection slots: fails at maxclients.
  bool TryAcquireClientSlot() { return clients_.TryAcquireSlot(settings_.maxclients()); }
  // Client eviction (server/client_eviction.h, as Redis's maxmemory-clients).
  ClientEviction& client_eviction() { return eviction_; }

  ServerStats Stats() const override;
  void ResetStats() override;

  // Stage 2 (server/attention.h).
  Attention& attention() { return attention_; }
  // Observability (docs/operations.md). Per-command counters, summed over
  // the workers (slots as commands().stat_name()), and error-code counts.
  std::vector<CommandCounters> CommandCountersAll() const override;
  // Worker `w`'s counters; before the workers run (in-process command tests)
  // one spare table, for the one thread that dispatches then.
  CommandStats& cmdstats_of(int w) override;
  std::map<std::string, uint64_t> ErrorCounts() const override;
  // The histograms latency-tracking fills, summed over the workers (empty
  // when no command was tracked since the last reset).
  std::vector<TrackHist> TrackedLatencyAll() const override;
  // The slow log, the latency monitor, MONITOR and the instantaneous rates
  // (server/observability.h).
  Observability& observability() { return observability_; }
  // Pub/Sub (server/pubsub.h): the subscription registry every worker shares.
  PubSub& pubsub() { return pubsub_; }
  // Keyspace notifications (server/notify.h): publishes `event` for `key` when
  // notify-keyspace-events enables `type` and someone could hear it (two
  // relaxed loads otherwise). Any thread.
  void NotifyKeyspaceEvent(uint32_t type, std::string_view event, std::string_view key) {
    uint32_t f = env_.notify_flags();
    if ((f & type) && (f & (kNotifyKeyspace | kNotifyKeyevent)) && pubsub_.key_listeners())
      NotifyKeyspaceEventSlow(f, event, key);
  }
  uint32_t notify_flags() const { return env_.notify_flags(); }
  // Whether an event of class `type` would be published now (for an event
  // that needs extra work to detect, such as whether a key is new).
  bool NotifyWanted(uint32_t type) const {
    uint32_t f = env_.notify_flags();
    return (f & type) && (f & (kNotifyKeyspace | kNotifyKeyevent)) && pubsub_.key_listeners();
  }
  // Client-side caching (server/tracking.h): the tracking table every worker
  // shares.
  Tracking& tracking() { return tracking_; }
  // After a command ran (worker thread, also each command of an EXEC): a
  // tracking client's read keys are remembered, a successful write's keys
  // invalidated. One relaxed load while nobody tracks.
  void TrackCommand(std::span<const std::string_view> args, const CommandSpec& spec,
                    const ClientInfo& client, bool failed) {
    if (tracking_.armed()) TrackCommandSlow(args, spec, client, failed);
  }
  // Delivers the Pub/Sub messages waiting in worker `w`'s mailbox now
  // (worker `w`'s own thread; none before the workers run).
  void DeliverQueuedPushes(int w) override;
  // A client leaves Pub/Sub (close, RESET): its subscriptions go.
  void PubSubRemoveClient(ClientInfo* c) override;
  // 40 hex digits, random per start (INFO replication, ROLE).
  const std::string& replid() const override { return replid_; }
  // Every 100 ms, by worker 0: the instantaneous rates (observability()),
  // the memory peak, client eviction.
  void SampleRates();
  // The memory figures (server/memory_gauge.h): used_memory, the allocator's
  // figure and their peaks.
  MemoryGauge& memory() { return memory_; }

 private:
  void TrackCommandSlow(std::span<const std::string_view> args, const CommandSpec& spec,
                        const ClientInfo& client, bool failed) override;
  void StopWorkers();
  // PushSink: a Pub/Sub message for client `id` of worker `w`.
  void Push(int w, uint64_t id, const std::shared_ptr<const std::string>& msg) override;
  void NotifyKeyspaceEventSlow(uint32_t flags, std::string_view event,
                               std::string_view key) override;
  // Copies cfg_'s run-time settings into the atomics the accessors read.
  void PublishRuntimeSettings();

  Config cfg_;
  WriterFirstMutex exec_mu_;
  // Guards cfg_'s run-time fields during CONFIG SET/GET. cfg_ itself is not
  // annotated: config() reads its start-up fields without a lock.
  mutable base::Mutex config_mu_;
  std::unique_ptr<store::Store> store_;
  CommandTable commands_;
  Acl acl_;
  std::atomic<bool> loading_{false};
  uint64_t start_time_us_ = 0;
  std::string run_id_;

  ClientPause client_pause_;
  RuntimeSettings settings_;

  DurabilityGate durability_;
  ClientRegistry clients_;
  ClientEviction eviction_{&clients_, &settings_,
                           [this](uint64_t id) { return ClosePickedClient(id); }};
  TaskRunner background_;
  SaveScheduler saves_{&background_};

  Listeners listeners_;
  int shutdown_fd_ = -1;  // eventfd written by RequestShutdown
  std::atomic<bool> shutting_down_{false};
  std::vector<std::unique_ptr<Worker>> workers_;

  std::atomic<uint64_t> next_worker_{0};
  std::unique_ptr<CommandService> service_;  // the workers' net::Service
  PubSub pubsub_{this};
  Tracking tracking_{&clients_, this};

  // Told by the store what leaves it: Stage 2's attention slots of a
  // namespace go, tracked clients are invalidated, keyspace notifications
  // are sent (expired, evicted, kvprefix.drop).
  class StoreRemovals final : public store::RemovalObserver {
   public:
    StoreRemovals(Server* s, attend::SlotCache* c) : server_(s), cache_(c) {}
    void OnNamespaceRemoved(std::string_view ns) override { cache_->DropNamespace(ns); }
    void OnNamespaceGone(std::string_view ns, bool evicted) override;
    void OnStringRemoved(std::string_view key, bool evicted) override;
    void OnFlushAll() override { cache_->Clear(); }

   private:
    Server* server_;
    attend::SlotCache* cache_;
  };
  Attention attention_;
  StoreRemovals store_removals_{this, &attention_.cache()};
  Observability observability_;  // delivers MONITOR lines through workers_
  std::string replid_;
  int rate_ticks_ = 0;  // SampleRates' calls (worker 0's thread only)
  MemoryGauge memory_{&background_};
  std::unique_ptr<CommandStats> spare_stats_;  // see cmdstats_of()
  // What the handlers see (command_env.h); filled in by the constructor. It also
  // holds the receipt, the notify-keyspace-events flags, the durability layer and
  // the KV events pointer, which the accessors above read.
  CommandEnv env_;
};

}  // namespace pion::server
