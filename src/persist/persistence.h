// Persistence: the durability layer as the server sees it. It owns the WAL
// writer (the log the store's changes go to), runs recovery at start-up, takes snapshots
// (KV.PREFIX.SAVE, automatic compaction when the WAL passes
// --auto-save-wal-bytes, SHUTDOWN SAVE) in a background thread while clients
// keep being served, and reports the counters of KV.PREFIX.INFO and
// INFO persistence. docs/wal_format.md and docs/snapshot_format.md describe
// the files; docs/ARCHITECTURE.md "Recovery" the design.
//
// Thread-safety: every public method may be called from any thread after
// Recover() returned OK. One save runs at a time (a second waits for it).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "persist/env.h"
#include "persist/records.h"
#include "persist/recovery.h"
#include "persist/wal_writer.h"

namespace pion::persist {

struct PersistOptions {
  std::string dir = ".";
  SyncPolicy policy = SyncPolicy::kEverySec;
  uint64_t auto_save_wal_bytes = 0;  // 0 = max(64 MiB, last snapshot size)
  bool wal_repair = false;
  Env* env = nullptr;      // nullptr = PosixEnv()
  bool background = true;  // auto-save thread (tests may turn it off)
  // Automatic snapshot after a failure (full disk): retried after min, then
  // twice as long each time, at most max (milliseconds).
  uint64_t auto_save_retry_min_ms = 1000;
  uint64_t auto_save_retry_max_ms = 300000;
  // Passed to recovery (RecoveryOptions::keep_freed_heap).
  std::function<void(uint64_t snapshot_bytes)> keep_freed_heap;
  bool map_snapshot = true;  // RecoveryOptions::map_snapshot (snapshot-mmap)
  // RecoveryOptions::snapshot_verify_threads (snapshot-verify-threads, resolved).
  uint32_t snapshot_verify_threads = 1;
  // WalWriter::SetPreallocateBytes (wal-preallocate-bytes); 0 = off.
  uint64_t wal_preallocate_bytes = 64ull << 20;
  // Keep the WAL file a compaction retires as the next one's file
  // (wal-recycle; docs/wal_format.md §6). Off: it is removed, and a spare left
  // by an earlier run is removed at start-up.
  bool wal_recycle = true;
};

struct PersistStats {
  bool wal_enabled = false;
  uint64_t wal_bytes = 0;
  uint64_t wal_appended = 0;
  uint64_t wal_replayed = 0;
  uint64_t wal_generation = 0;
  uint64_t last_lsn = 0;
  uint64_t durable_lsn = 0;
  bool wal_broken = false;
  uint64_t wal_resumes = 0;  // writes resumed after a WAL failure without a restart
  int64_t last_save_unix = 0;
  bool last_save_ok = true;
  bool save_in_progress = false;
  uint64_t saves = 0;
  uint64_t snapshot_bytes = 0;
  bool snapshot_mapped = false;  // the last start-up loaded the snapshot by mapping it
  double last_save_seconds = 0;
  uint64_t auto_save_threshold = 0;
  double recovery_seconds = 0;
  uint64_t loaded_namespaces = 0;
  uint64_t loaded_rows = 0;
  uint64_t auto_save_attempts = 0;
  uint64_t auto_save_failures = 0;  // consecutive failed automatic snapshots
  uint64_t wal_syncs = 0;
  uint64_t wal_sync_us = 0;
  uint64_t wal_sync_hist[kSyncHistBuckets] = {};  // see WalStats
};

class Persistence {
 public:
  // `host` is the data persisted (the store, through its adapter).
  Persistence(std::unique_ptr<PersistHost> host, PersistOptions opt);
  // A data object of another type (the store), adapted by MakePersistHost(data),
  // found by argument-dependent lookup (persist/records.h).
  template <class Data>
  requires(!std::is_convertible_v<Data*, PersistHost*>) Persistence(Data* data, PersistOptions opt)
      : Persistence(MakePersistHost(data), std::move(opt)) {}
  ~Persistence();  // Close()
  Persistence(const Persistence&) = delete;
  Persistence& operator=(const Persistence&) = delete;

  // Loads the snapshot, replays the WAL, opens it for appending and attaches
  // the writer as the host's log. Corruption stops start-up (the message
  // names file and offset).
  Status Recover();

  // Saves a snapshot now, in the caller's thread (blocking only the caller):
  // `path` empty = pion.vstore in --dir and compaction of the WAL; otherwise a
  // relative path inside --dir (ValidateSavePath) and the WAL is untouched.
  Status Save(std::string_view path);
  // Refuses absolute paths, '~', '..' components, control bytes and WAL names.
  static Status ValidateSavePath(std::string_view path);

  // Every write appended so far is durable when this returns OK (KV.PREFIX.COMMIT).
  Status Commit();
  // Durability of one mutation: whether replies wait, and for what.
  bool AckWaitsForSync() const { return wal_ && wal_->AckWaitsForSync(); }
  Status WaitDurable(uint64_t lsn) { return wal_->WaitDurable(lsn); }
  uint64_t durable_lsn() const { return wal_ ? wal_->durable_lsn() : 0; }
  // Told the LSN up to which replies may be sent (monotonic): the durable LSN
  // under `always`, every appended LSN otherwise. Called from the WAL's sync
  // thread and from appending threads. Set before Recover().
  void SetAckCallback(std::function<void(uint64_t)> cb) { on_ack_ = std::move(cb); }
  // Requests a sync of everything appended so far; returns the LSN it covers
  // (KV.PREFIX.COMMIT under `always` waits for it like any write).
  uint64_t RequestSync() { return wal_ ? wal_->RequestSync() : 0; }
  void SetPolicy(SyncPolicy p);

  // Syncs the WAL and stops the background thread (SIGTERM, SHUTDOWN). Idempotent.
  Status Close();

  PersistStats Stats() const;
  WalWriter* wal() { return wal_.get(); }

  // One step of the automatic snapshot (the background thread calls it every
  // 100 ms; tests call it with their own clock): snapshots when the WAL passed
  // its threshold or is broken (a snapshot heals it), unless a failure's
  // back-off runs until after `now_ms`. True if it tried.
  bool AutoSaveTick(uint64_t now_ms);
  // The back-off after `failures` consecutive failed automatic snapshots.
  uint64_t AutoSaveBackoffMs(uint64_t failures) const;

 private:
  Status SaveLocked(std::string_view path) REQUIRES(save_mu_) EXCLUDES(mu_);
  // SaveLocked with saving_ raised and last_save_ok recorded.
  Status RunSaveLocked(std::string_view path) REQUIRES(save_mu_) EXCLUDES(mu_);
  void BackgroundLoop() EXCLUDES(mu_);
  uint64_t AutoSaveThreshold() const EXCLUDES(mu_);

  std::unique_ptr<PersistHost> host_;
  PersistOptions opt_;
  Env* env_;
  std::unique_ptr<WalWriter> wal_;
  std::function<void(uint64_t)> on_ack_;
  std::atomic<uint64_t> acked_{0};

  base::Mutex save_mu_ ACQUIRED_BEFORE(mu_);  // one save at a time
  std::vector<std::string> live_wal_names_ GUARDED_BY(save_mu_);

  mutable base::Mutex mu_;
  base::CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool closed_ GUARDED_BY(mu_) = false;
  std::thread bg_;
  PersistStats stats_ GUARDED_BY(mu_);  // save/recovery fields
  uint64_t next_auto_save_ms_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> saving_{false};
};

}  // namespace pion::persist
