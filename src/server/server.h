// Server: process orchestration. It owns the config, the store (only with
// --kvcache), the receipt, the command table, the client registry
// (client_registry.h), the durability gate (durability_gate.h), the
// background task runner, the workers and the listening socket, and the hooks
// into persistence. Passed explicitly to handlers through
// CommandContext::server (no globals).
//
// Thread-safety: everything here may be used from any worker thread unless a
// comment says otherwise. Settings that CONFIG SET can change at run time are
// read through the relaxed-atomic accessors below (maxclients(), timeout_s(),
// output_limit(), maxmemory()); config() holds the values given at start-up
// and CONFIG SET keeps it in step under config_mu_ for CONFIG GET.
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

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "attend/compute_pool.h"
#include "attend/precision.h"
#include "attend/slot_cache.h"
#include "server/client_registry.h"
#include "server/command_service.h"
#include "server/commands/command_table.h"
#include "server/config.h"
#include "server/durability_gate.h"
#include "server/receipt.h"
#include "server/task_runner.h"
#include "store/store.h"

namespace pion::persist {
class Persistence;
}  // namespace pion::persist

namespace pion::server {

class Worker;

// What persistence plugs in (all optional; set before Start()).
struct PersistenceHooks {
  // The durability layer (src/server/persist_glue.h; owned by main), for
  // KV.PREFIX.SAVE / COMMIT / INFO. nullptr without --kvcache.
  persist::Persistence* persistence = nullptr;
  // SHUTDOWN SAVE: take a snapshot; an error refuses the shutdown (unless FORCE).
  std::function<Status()> save;
  // Graceful exit, after clients stopped sending and before they are closed:
  // flush and fsync the log, then NotifyDurable() so held replies go out.
  std::function<void()> flush_on_exit;
  // CONFIG SET appendfsync at run time.
  std::function<void(FsyncPolicy)> set_appendfsync;
  // Extra lines ("name:value\r\n") for INFO's "# Persistence" section.
  std::function<void(std::string* out)> info;
};

// Server-wide counters (INFO stats), summed over the workers' own copies.
struct ServerStats {
  uint64_t connections_received = 0;
  uint64_t commands_processed = 0;
  uint64_t net_input_bytes = 0;
  uint64_t net_output_bytes = 0;
  uint64_t rejected_connections = 0;
  uint64_t output_limit_disconnections = 0;
  uint64_t protocol_errors = 0;
  uint64_t error_replies = 0;
};

class Server {
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
  store::Store* store() { return store_.get(); }
  Receipt& receipt() { return receipt_; }
  bool loading() const { return loading_.load(std::memory_order_acquire); }
  void set_loading(bool v) { loading_.store(v, std::memory_order_release); }
  uint64_t start_time_us() const { return start_time_us_; }
  const CommandTable& commands() const { return commands_; }
  // What the workers' connections serve (net::Service).
  net::Service* service() { return &service_; }

  // Binds the listening sockets (RESP; the fast lane with --kvcache) and starts
  // the workers.
  Status Start();
  // Blocks until SIGTERM/SIGINT arrives on `signal_fd` (a signalfd; -1 for
  // none) or a SHUTDOWN command, then shuts down gracefully: stop accepting,
  // stop reading, flush the log (hook), send what is queued, close, join the
  // workers. Returns the process exit code.
  int Serve(int signal_fd);
  // Asks Serve() to shut down (thread-safe; SHUTDOWN calls it).
  void RequestShutdown();
  // SHUTDOWN SAVE: runs the persistence save hook (OK when there is none).
  Status SaveForShutdown();
  int NextWorker() {
    return static_cast<int>(next_worker_.fetch_add(1, std::memory_order_relaxed) % workers_.size());
  }
  bool shutting_down() const { return shutting_down_.load(std::memory_order_acquire); }

  // The TCP port actually bound (differs from config().port when that is 0).
  int port() const { return port_; }
  // The fast lane's bound port, 0 when it is off (also config().fastlane_port
  // once started).
  int fastlane_port() const { return fastlane_port_; }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  Worker* worker(int i) { return workers_[i].get(); }
  const std::string& run_id() const { return run_id_; }

  // Run-time settings.
  uint64_t maxclients() const { return maxclients_.load(std::memory_order_relaxed); }
  uint64_t timeout_s() const { return timeout_s_.load(std::memory_order_relaxed); }
  uint64_t output_limit() const { return output_limit_.load(std::memory_order_relaxed); }
  uint64_t output_soft_limit() const { return output_soft_limit_.load(std::memory_order_relaxed); }
  // The smallest nonzero output limit (UINT64_MAX when there is none).
  uint64_t output_check_threshold() const {
    uint64_t h = output_limit(), s = output_soft_limit();
    if (h == 0) h = UINT64_MAX;
    if (s == 0) s = UINT64_MAX;
    return h < s ? h : s;
  }
  uint64_t output_soft_seconds() const {
    return output_soft_seconds_.load(std::memory_order_relaxed);
  }
  uint64_t maxmemory() const { return maxmemory_.load(std::memory_order_relaxed); }
  // protected-mode yes and no requirepass: only loopback peers are served.
  bool protected_mode() const { return cfg_.protected_mode && cfg_.requirepass.empty(); }
  // A copy of the current configuration (CONFIG GET).
  Config ConfigSnapshot() const;
  // CONFIG SET: validates every pair, then applies them all or none. `*lsn`
  // gets the log position of any eviction it caused. Errors are reply texts.
  Status SetConfig(const std::vector<std::pair<std::string, std::string>>& pairs, uint64_t* lsn);

  // Durability: the acknowledged LSN and the workers' held replies.
  DurabilityGate& durability() { return durability_; }
  void SetPersistenceHooks(PersistenceHooks h) { hooks_ = std::move(h); }
  const PersistenceHooks& hooks() const { return hooks_; }

  // Background tasks (see the file comment). Post() fails once shutting down.
  TaskRunner& background() { return background_; }
  // KV.PREFIX.SAVE runs one at a time: TryBeginSave() is false while one is
  // queued or running (the caller answers "Background save already in
  // progress"); EndSave() when it finished, before its reply is sent.
  bool TryBeginSave() { return !save_running_.exchange(true, std::memory_order_acq_rel); }
  void EndSave() { save_running_.store(false, std::memory_order_release); }
  bool save_running() const { return save_running_.load(std::memory_order_acquire); }

  // The connected clients, their slots and their buffers' memory.
  ClientRegistry& clients() { return clients_; }
  // Held shared by every command, exclusively by EXEC (commands/transaction.h).
  std::shared_mutex& exec_mu() { return exec_mu_; }
  // Asks the owning worker to close client `id`; false if there is none.
  bool KillClient(uint64_t id);
  // Connection slots: fails at maxclients.
  bool TryAcquireClientSlot() { return clients_.TryAcquireSlot(maxclients()); }
  // Admits `n` more bytes of client buffers within maxmemory-clients.
  bool ReserveClientMemory(uint64_t n) { return clients_.ReserveMemory(n, maxmemory_clients()); }
  uint64_t maxmemory_clients() const { return maxmemory_clients_.load(std::memory_order_relaxed); }

  ServerStats Stats() const;
  void ResetStats();

  // Stage 2 (src/server/commands/attend.cc). The warm/cold slot cache and the compute
  // pool exist for the whole life of the server; the slots of namespace <ns> and
  // <ns>_attn go when the store drops or evicts <ns>, all of them on FLUSHALL.
  attend::SlotCache& attend_cache() { return attend_cache_; }
  attend::ComputePool& attend_pool() { return *attend_pool_; }
  attend::Precision attend_precision() const {
    return static_cast<attend::Precision>(attend_precision_.load(std::memory_order_relaxed));
  }
  uint64_t attend_pool_min_bytes() const {
    return attend_pool_min_bytes_.load(std::memory_order_relaxed);
  }
  uint32_t attend_threads() const { return attend_threads_; }
  void CountAttendQuery() { attend_queries_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t attend_queries() const { return attend_queries_.load(std::memory_order_relaxed); }

 private:
  void StopWorkers();
  // Binds the fast lane's socket as configured (fastlane_port_, fastlane_fd_).
  Status ListenFastLane();
  // Copies cfg_'s run-time settings into the atomics the accessors read.
  void PublishRuntimeSettings();

  Config cfg_;
  std::shared_mutex exec_mu_;
  mutable std::mutex config_mu_;  // guards cfg_'s run-time fields during CONFIG SET/GET
  std::unique_ptr<store::Store> store_;
  Receipt receipt_;
  CommandTable commands_;
  std::atomic<bool> loading_{false};
  uint64_t start_time_us_ = 0;
  std::string run_id_;

  std::atomic<uint64_t> maxclients_{0};
  std::atomic<uint64_t> timeout_s_{0};
  std::atomic<uint64_t> output_limit_{0};
  std::atomic<uint64_t> output_soft_limit_{0};
  std::atomic<uint64_t> output_soft_seconds_{0};
  std::atomic<uint64_t> maxmemory_clients_{0};
  std::atomic<uint64_t> maxmemory_{0};

  DurabilityGate durability_;
  ClientRegistry clients_;
  PersistenceHooks hooks_;
  TaskRunner background_;
  std::atomic<bool> save_running_{false};

  int listen_fd_ = -1;
  int port_ = 0;
  int fastlane_fd_ = -1;
  int fastlane_port_ = 0;
  int shutdown_fd_ = -1;  // eventfd written by RequestShutdown
  std::atomic<bool> shutting_down_{false};
  std::vector<std::unique_ptr<Worker>> workers_;

  std::atomic<uint64_t> next_worker_{0};
  CommandService service_{this};

  // Stage 2.
  class AttendObserver final : public store::RemovalObserver {
   public:
    explicit AttendObserver(attend::SlotCache* c) : cache_(c) {}
    void OnNamespaceRemoved(std::string_view ns) override { cache_->DropNamespace(ns); }
    void OnFlushAll() override { cache_->Clear(); }

   private:
    attend::SlotCache* cache_;
  };
  attend::SlotCache attend_cache_;
  AttendObserver attend_observer_{&attend_cache_};
  uint32_t attend_threads_ = 1;
  std::unique_ptr<attend::ComputePool> attend_pool_;
  std::atomic<uint8_t> attend_precision_{static_cast<uint8_t>(attend::Precision::kF16)};
  std::atomic<uint64_t> attend_pool_min_bytes_{0};
  std::atomic<uint64_t> attend_queries_{0};
};

}  // namespace pion::server
