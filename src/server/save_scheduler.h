// SaveScheduler: the server's snapshots and Redis's save points (config `save`,
// docs/operations.md "Persistence for Redis users"). pion has one persistence
// operation, the snapshot (the data set written out, then the WAL truncated to
// what follows it); SAVE, BGSAVE, BGREWRITEAOF, KV.PREFIX.SAVE, a due save point,
// FLUSHALL with save points set and SHUTDOWN SAVE all take it through here, one
// at a time. The background ones run on the server's background runner (Redis
// forks a child for them; INFO's total_forks counts them here). The server owns
// one (Server::saves(), CommandEnv::saves()).
//
// Thread-safety: any thread. The flags and counters are atomics; the save
// points (copied from the config at start-up and by CONFIG SET) are under mu_,
// a leaf lock (CONFIG SET publishes them with the server's config lock held).
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "server/task_runner.h"

namespace pion::persist {
class Persistence;
}  // namespace pion::persist

namespace pion::server {

// What StartBackgroundSave did (BGSAVE and BGREWRITEAOF word their reply by it).
enum class BgSaveStart { kStarted, kBusy, kNoPersistence, kShuttingDown };

class SaveScheduler {
 public:
  // (seconds, changes): a snapshot when `changes` writes happened in `seconds`.
  using SavePoints = std::vector<std::pair<uint64_t, uint64_t>>;

  // `background` runs the background snapshots.
  explicit SaveScheduler(TaskRunner* background) : background_(background) {}
  SaveScheduler(const SaveScheduler&) = delete;
  SaveScheduler& operator=(const SaveScheduler&) = delete;

  // The durability layer the snapshots go through (nullptr without --kvcache or
  // with appendonly no: every save is refused or skipped), set before the
  // workers start.
  void set_persistence(persist::Persistence* p) { persistence_ = p; }
  // The config's `save` (start-up and each CONFIG SET).
  void SetSavePoints(SavePoints points) EXCLUDES(mu_);

  // One snapshot at a time: TryBeginSave() is false while one is queued or
  // running (the caller answers "Background save already in progress");
  // EndSave() when it finished, before its reply is sent.
  bool TryBeginSave() { return !save_running_.exchange(true, std::memory_order_acq_rel); }
  void EndSave() {
    aof_rewrite_running_.store(false, std::memory_order_release);
    save_running_.store(false, std::memory_order_release);
  }
  bool save_running() const { return save_running_.load(std::memory_order_acquire); }
  // A background snapshot (BGSAVE, BGREWRITEAOF, a save point) was queued,
  // after TryBeginSave: INFO's total_forks counts them, aof_rewrite_in_progress
  // is 1 for a BGREWRITEAOF until its EndSave (pion forks nothing: the
  // snapshot runs on a thread).
  void NoteBackgroundSave(bool aof_rewrite) {
    background_saves_.fetch_add(1, std::memory_order_relaxed);
    aof_rewrite_running_.store(aof_rewrite, std::memory_order_release);
  }
  uint64_t background_saves() const { return background_saves_.load(std::memory_order_relaxed); }
  bool aof_rewrite_running() const { return aof_rewrite_running_.load(std::memory_order_acquire); }

  // Queues a background snapshot (BGSAVE, BGREWRITEAOF) on the background runner.
  BgSaveStart StartBackgroundSave(bool aof_rewrite);
  // Save points: a background snapshot when one is due, as Redis's serverCron;
  // worker 0 calls it every 100 ms (through Server::SavePointsCron, which skips
  // it while loading).
  void SavePointsCron() EXCLUDES(mu_);
  // FLUSHALL with save points set: the snapshot at once, on the caller's
  // thread (the data set was just emptied), as Redis's FLUSHALL saves.
  void SaveAfterFlushAll() EXCLUDES(mu_);
  // SHUTDOWN SAVE: the snapshot on the caller's thread (OK without persistence).
  Status SaveForShutdown();

 private:
  TaskRunner* const background_;
  persist::Persistence* persistence_ = nullptr;
  mutable base::Mutex mu_;
  SavePoints points_ GUARDED_BY(mu_);
  std::atomic<bool> save_running_{false};
  std::atomic<bool> aof_rewrite_running_{false};
  std::atomic<uint64_t> background_saves_{0};
  // When a save point last started a snapshot (Unix seconds), and whether the
  // last such snapshot failed: a failed one is retried after 5 seconds.
  std::atomic<int64_t> save_point_try_unix_{0};
  std::atomic<bool> save_point_failed_{false};
  // When the server started (Unix seconds): save points count from it until
  // the first snapshot, as Redis's lastsave.
  const int64_t started_unix_ = UnixSeconds();
};

}  // namespace pion::server
