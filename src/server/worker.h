// Worker: one thread running one EventLoop and the connections it owns. All
// workers watch every listening socket (RESP, and the fast lane with
// --kvcache; EPOLLEXCLUSIVE, so one wakes per incoming connection); whichever accepts hands the
// socket round-robin to a worker, which owns it for its lifetime. Any worker serves any command:
// the store is shared, so there are no redirects.
//
// Cross-thread entry points (Adopt, Kill, CompleteDeferred, BeginShutdown,
// FinishShutdown, and held_replies().Wake) post a task to the loop; everything
// else runs on the worker's own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "server/command_stats.h"
#include "server/durability_gate.h"
#include "server/net_types.h"

namespace pion::tier {
class ReadRing;
}

namespace pion::server {

class Server;

// A listening socket and the protocol its connections speak.
struct ListenSocket {
  int fd;
  net::Protocol protocol;
  bool tls = false;  // a TLS session runs under the protocol
};

// Per-worker counters, summed by Server::Stats(). Relaxed atomics: written by
// the worker, read by INFO on any thread.
// The transport's own counters (commands, bytes, errors) are net::ConnStats.
struct alignas(64) WorkerStats : net::ConnStats {
  std::atomic<uint64_t> connections_received{0};
  std::atomic<uint64_t> rejected{0};
};

// The ConnHost of the connections it owns (net/service.h).
class Worker final : public net::ConnHost {
 public:
  Worker(Server* server, int index, size_t pool_bytes);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Creates the loop and watches the listeners for connections.
  Status Init(const std::vector<ListenSocket>& listeners);
  void Start();  // spawns the thread
  void Join();

  int index() const override { return index_; }
  Server* server() { return server_; }
  EventLoop& loop() override { return loop_; }
  BufferPool& pool() override { return pool_; }
  WorkerStats& stats() override { return stats_; }
  // Per-command counters (written by this worker only; see command_stats.h).
  CommandStats& cmdstats() { return cmdstats_; }
  const CommandStats& cmdstats() const { return cmdstats_; }

  // Any thread.
  void Adopt(int fd, ListenSocket l);  // take ownership of an accepted socket
  void Kill(uint64_t client_id);
  // A MONITOR line for client `client_id` (dropped if it is gone).
  void PushMonitor(uint64_t client_id, std::shared_ptr<const std::string> line);
  // A Pub/Sub message for client `client_id` (dropped if it is gone): queued in
  // this worker's mailbox, delivered on its loop, before the next batch of
  // input any of its connections runs (BeforeInput) at the latest.
  void DeliverPush(uint64_t client_id, std::shared_ptr<const std::string> msg);
  // A DeferredReply's completion: writes it to client `client_id` if that
  // connection still exists (dropped otherwise).
  void CompleteDeferred(uint64_t client_id, uint64_t slot, DeferredReply::WriteFn fn) override;
  // CLIENT PAUSE: asks client `client_id`'s postponed request again later.
  void ResumeAfter(uint64_t client_id, uint64_t delay_ms) override;
  // Stops accepting and reading; calls `done` on the worker thread afterwards.
  void BeginShutdown(std::function<void()> done);
  // CONFIG SET port: on the worker's thread, accepts on `new_fd` instead of
  // `old_fd` from now on, then calls done() (the server closes old_fd once
  // every worker let go of it).
  void ReplaceListener(int old_fd, int new_fd, std::function<void()> done);
  // Closes every connection once its queued replies are sent (at most
  // `deadline_ms` later), then stops the loop.
  void FinishShutdown(uint64_t deadline_ms);

  // Worker thread.
  void Release(Connection* c) override;  // a closed connection: free it after the batch
  void WaitDurable(Connection* c, uint64_t lsn) override;
  void BeforeInput() override {
    if (inbox_ready_.load(std::memory_order_acquire)) DrainInbox(false);
  }
  size_t num_connections() const { return conns_.size(); }
  // Its connections that hold replies for durability (the gate wakes it).
  HeldReplies& held_replies() { return held_; }

 private:
  // Stops accepting for a moment when accept() cannot get a descriptor or
  // memory (the listener is level-triggered: retrying at once would spin).
  void PauseAccepting();
  Status WatchListeners();
  void OnAccept(const ListenSocket& l);
  void AddConnection(int fd, ListenSocket l);
  void Cron();
  void MaybeStop();
  // On the worker's thread: its ring of tier reads (tier-ring-depth), watched
  // by its loop and installed as the thread's (Store::ReadTiered uses it).
  void StartTierRing();
  // Queues the mailbox's messages on their connections; `posted`: called by
  // the posted task (which alone clears inbox_posted_, so at most one task is
  // outstanding). The connections are flushed once, after the current batch
  // of events (FlushPushed), so many publishers cost one write per subscriber.
  void DrainInbox(bool posted);
  void FlushPushed();

  Server* server_;
  int index_;
  std::vector<ListenSocket> listeners_;
  bool accept_paused_ = false;        // after EMFILE & co. (see OnAccept)
  LogRateLimit accept_log_{1000000};  // at most one accept error line a second
  EventLoop loop_;
  BufferPool pool_;
  WorkerStats stats_;
  CommandStats cmdstats_;
  std::thread thread_;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  HeldReplies held_;
  std::unique_ptr<tier::ReadRing> tier_ring_;  // made and used on the worker's thread
  bool shutting_down_ = false;
  bool stopping_ = false;
  // Pub/Sub mailbox (DeliverPush): any thread appends, the worker drains.
  struct Push {
    uint64_t client_id;
    std::shared_ptr<const std::string> msg;
  };
  std::mutex inbox_mu_;
  std::vector<Push> inbox_;               // guarded by inbox_mu_
  bool inbox_posted_ = false;             // a drain task is posted; guarded by inbox_mu_
  std::atomic<bool> inbox_ready_{false};  // inbox_ is not empty
  std::vector<Push> inbox_batch_;         // the worker's drained batch (reused)
  std::vector<uint64_t> pushed_to_;       // connections to flush after this batch
  bool flush_deferred_ = false;           // FlushPushed is scheduled
};

}  // namespace pion::server
