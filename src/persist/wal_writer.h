// WalWriter: appends store mutations to the write-ahead log
// (docs/wal_format.md) and makes them durable according to the fsync policy.
// It is the MutationSink the store logs into (persist/records.h).
//
// Appending is split in two (docs/wal_format.md §6). Under write_mu_ an
// append only reserves its LSN and its byte range at the file's end (and is
// counted in flight); it then checksums and pwrites the record with no lock
// held, concurrently with other appends, rows first and header last. Completion
// is tracked under state_mu_: written_lsn_ is the contiguous high-water mark (an
// LSN counts as written only when every record up to it has been fully
// written), and every ack, fdatasync target and durable LSN is taken from it,
// never from an LSN whose predecessors are still being written. Nothing in an
// append waits for the disk or for another append. A sync thread does every
// fdatasync and publishes the durable LSN (group commit under `always`: one
// fdatasync serves every write that completed meanwhile). Waiters block in
// WaitDurable or are told through the ack callback.
//
// A failed write (ENOSPC, EIO): that append and every append reserved after it
// return an error (the store applies nothing), the contiguous mark never passes
// the failed record, and once the appends in flight have finished the file is
// truncated at the failed record so that no valid record follows a gap. If no
// record after it had been reported written, appends then resume at its LSN and
// offset (a clean cut). Otherwise, and after a failed fdatasync (the kernel may
// have dropped the dirty pages), the WAL refuses appends until a snapshot heals
// it: Rotate at its barrier makes the new file durable itself, and
// FinishRotation reopens the WAL for appends (docs/wal_format.md §6). Reads
// continue throughout. Disk space can be preallocated ahead of the appends
// (SetPreallocateBytes, PreallocateAhead); a preallocation that fails is logged
// and appending goes on without it, so a full disk still shows as a failed
// write, handled as above.
//
// Two-phase appends (Reserve with a PendingRecord) let the store fix a
// record's LSN under its locks and write the body after releasing them.
//
// Thread-safety: all public methods may be called from any thread. Locks, in the
// order they are taken: rotate_mu_, write_mu_, state_mu_ (annotated: the clang
// thread-safety build checks every member below against its lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "persist/env.h"
#include "persist/records.h"
#include "persist/wal_format.h"

namespace pion::persist {

enum class SyncPolicy : uint8_t { kAlways, kEverySec, kNo };

// fsync latency histogram buckets: upper bounds 2^i microseconds, the last +Inf.
inline constexpr size_t kSyncHistBuckets = 26;

struct WalStats {
  uint64_t generation = 0;
  uint64_t bytes = 0;     // size of the active WAL file
  uint64_t appended = 0;  // records appended since open or the last compaction
  uint64_t last_lsn = 0;
  uint64_t durable_lsn = 0;
  uint64_t syncs = 0;
  bool broken = false;
  uint64_t resumes = 0;  // times appends resumed after a failure without a restart
  uint64_t sync_us = 0;  // time spent in fsync (all of syncs)
  uint64_t sync_hist[kSyncHistBuckets] = {};  // per bucket, not cumulative
  uint64_t recycled = 0;  // rotations that reused the spare file instead of a new one
};

class WalWriter final : public MutationSink {
 public:
  WalWriter(Env* env, std::string dir, SyncPolicy policy);
  ~WalWriter() override;  // syncs what was appended, stops the sync thread
  WalWriter(const WalWriter&) = delete;
  WalWriter& operator=(const WalWriter&) = delete;

  // Creates `name` in dir (generation, first_lsn), syncs it and the directory.
  Status Create(const std::string& name, uint64_t generation, uint64_t first_lsn);
  // Continues `name`, a checked WAL whose valid records end at `end`; the next
  // record gets `next_lsn`.
  Status Continue(const std::string& name, uint64_t generation, uint64_t next_lsn, uint64_t end);
  // Starts the sync thread. REQUIRES: Create or Continue succeeded.
  void Start() EXCLUDES(write_mu_);
  // Keeps disk space preallocated (WritableFile::Preallocate, the file's size
  // unchanged) `bytes` ahead of the append position, topped up whenever less
  // than half of it is left, by the append that notices, outside every lock
  // (wal-preallocate-bytes; docs/wal_format.md §6). 0 (the default): off.
  // Call before the first append.
  void SetPreallocateBytes(uint64_t bytes) { prealloc_bytes_ = bytes; }
  // Recycling (docs/wal_format.md §6): FinishRotation keeps the WAL file it
  // retires as `spare_name` in dir, and the next Rotate renames it to the new
  // file and overwrites it (its pages are cached and its blocks allocated)
  // instead of creating an empty one. `spare_exists`: a spare is on disk already
  // (start-up). Call before Start.
  void EnableRecycling(std::string spare_name, bool spare_exists) EXCLUDES(rotate_mu_) {
    spare_name_ = std::move(spare_name);
    base::MutexLock l(&rotate_mu_);
    spare_exists_ = spare_exists;
  }

  // MutationSink (the store logs into the writer directly). The record's
  // bytes come from the codec (EncodeWal, wal_format.h); the writer frames
  // them, reserves the LSN and the byte range, and writes: it knows no record
  // kind. With `out` the body is written through it (two-phase), without it
  // the record is written whole before returning.
  Result<uint64_t> Reserve(const Record& r, PendingRecord* out) override;

  // Snapshot barrier (no appends run meanwhile): every later record goes to a
  // new file "<base>.<G>" of generation G = current + 1. Sets G, the new file's
  // first LSN and its name.
  Status Rotate(const std::string& base, uint64_t* generation, uint64_t* first_lsn,
                std::string* name);
  // After Rotate: true if the WAL was broken at the barrier, so that the
  // snapshot being written is what heals it (the new file is already durable;
  // appends stay refused until FinishRotation). Persistence skips its Commit then.
  bool RotationHeals();
  // The snapshot after Rotate failed: if nothing was appended to the new file,
  // removes it and makes the previous file active again (no stray
  // "<base>.<G>" file is left); otherwise keeps it (it holds records).
  Status AbortRotation();
  // The active generation and the LSN the next record will get.
  void Position(uint64_t* generation, uint64_t* next_lsn);
  // After the snapshot of the active generation is durable: renames the active
  // file to `final_name`, removes `obsolete` files, syncs the directory; a
  // WAL broken at the barrier accepts appends again.
  Status FinishRotation(const std::string& final_name, const std::vector<std::string>& obsolete);

  // Durability. last_lsn() is the contiguous written mark (see above).
  uint64_t last_lsn() const;
  uint64_t durable_lsn() const;
  // True if replies wait for their LSN (policy always).
  bool AckWaitsForSync() const { return policy_.load() == SyncPolicy::kAlways; }
  // Blocks until `lsn` is durable; an error if the WAL broke first.
  Status WaitDurable(uint64_t lsn);
  // Asks for a sync of everything appended so far (every LSN reserved, so an
  // append that returned before is covered even while an earlier one is still
  // being written); returns the LSN to wait for.
  uint64_t RequestSync();
  // RequestSync + WaitDurable (KV.PREFIX.COMMIT, shutdown).
  Status Commit();
  // Told the LSN up to which replies may be sent: by the sync thread after each
  // sync (the durable LSN) and, unless the policy is `always`, by the append
  // that advances the contiguous written mark (that mark: replies do not wait
  // for the disk, but never for a record behind one still being written). Values may repeat or
  // arrive out of order between the two sources; the receiver keeps the maximum. Set before
  // Start().
  void SetAckCallback(std::function<void(uint64_t)> cb) { on_ack_ = std::move(cb); }
  void SetPolicy(SyncPolicy p);
  SyncPolicy policy() const { return policy_.load(); }
  WalStats Stats() const;
  std::string active_name() const EXCLUDES(write_mu_) {
    base::MutexLock l(&write_mu_);
    return active_name_;
  }

 private:
  struct File {
    std::string name;
    std::unique_ptr<WritableFile> f;
    // Disk space is preallocated up to here (UINT64_MAX: not at all, the Env
    // or the filesystem refused). Guarded by write_mu_.
    uint64_t prealloc_end = 0;
    // A recycled file holds stale records (older generations) below this
    // offset: the header slot of every record reserved there is zeroed under
    // write_mu_ before the reservation ends (docs/wal_format.md §6). 0: a new file.
    uint64_t stale_end = 0;
  };
  // Makes `f` (named `name`, holding records up to byte `end`) the file appends go
  // to, with the next record numbered `next_lsn`; resets the counters.
  void Adopt(const std::string& name, std::unique_ptr<WritableFile> f, uint64_t generation,
             uint64_t next_lsn, uint64_t end) EXCLUDES(write_mu_, state_mu_);
  // A record whose LSN and byte range are reserved (and counted in flight) but
  // not yet written; Write must be called exactly once.
  struct Reserved {
    RecordType type = RecordType::kStore;
    uint64_t lsn = 0, off = 0, gen = 0, len = 0;
    std::shared_ptr<File> file;
    std::vector<uint8_t> head;  // record header (filled by Write) + payload prefix
    Status stamp;               // zeroing the header slot in a recycled file failed
    // Wraps a reservation as the store's PendingRecord.
    static Status Into(WalWriter* w, Result<Reserved> r, PendingRecord* out);
  };
  // `head`: kRecordHeaderSize bytes (the header, filled by Write), then the
  // payload's prefix; `body_len` bytes follow it.
  Result<Reserved> ReserveBytes(RecordType t, std::vector<uint8_t> head, uint64_t body_len)
      EXCLUDES(write_mu_, state_mu_);
  Result<uint64_t> Write(Reserved& r, std::span<const uint8_t> body);
  // Write with the body in pieces (checksummed as one body, each piece written
  // where it lands; the header still last).
  Result<uint64_t> WriteParts(Reserved& r, std::span<const std::span<const uint8_t>> parts);
  // Records the outcome of the write of `lsn` (at `off` in `file`); returns
  // what the write returns.
  Result<uint64_t> Complete(uint64_t lsn, uint64_t off, const std::shared_ptr<File>& file,
                            const Status& s) EXCLUDES(write_mu_, state_mu_);
  // Waits (releasing state_mu_ meanwhile) until no append is in flight.
  void DrainLocked() REQUIRES(state_mu_);
  void SyncLoop() EXCLUDES(state_mu_);
  Status BrokenLocked() const REQUIRES(state_mu_);
  // After the failed record was cut off `file`: appends resume at its LSN and
  // offset if that is clean (see wal_format.md §6).
  void ResumeAfterCleanCut(const std::shared_ptr<File>& file) EXCLUDES(write_mu_, state_mu_);
  void ClearFailureLocked() REQUIRES(write_mu_, state_mu_);
  // Preallocates [from, from + len) of `file` (no lock held); a refusal turns
  // preallocation off for that file.
  void PreallocateAhead(const std::shared_ptr<File>& file, uint64_t from, uint64_t len)
      EXCLUDES(write_mu_);

  Env* env_;
  std::string dir_;
  std::atomic<SyncPolicy> policy_;
  uint64_t prealloc_bytes_ = 0;  // set before the first append
  std::function<void(uint64_t)> on_ack_;

  // Serialises reservations (LSN + offset) and rotations; never held across a
  // write or a sync.
  mutable base::Mutex write_mu_ ACQUIRED_BEFORE(state_mu_);
  std::shared_ptr<File> cur_ GUARDED_BY(write_mu_);  // (and state_mu_ to change)
  uint64_t generation_ GUARDED_BY(write_mu_) = 0;
  uint64_t next_lsn_ GUARDED_BY(write_mu_) = 1;
  uint64_t end_ GUARDED_BY(write_mu_) = 0;
  std::string active_name_ GUARDED_BY(write_mu_);  // (and rotate_mu_ to change)
  // Serialises Rotate and FinishRotation (the latter does file I/O without write_mu_).
  base::Mutex rotate_mu_ ACQUIRED_BEFORE(write_mu_);
  std::string spare_name_;  // recycling on iff not empty; set before Start
  bool spare_exists_ GUARDED_BY(rotate_mu_) = false;
  // The rotation of the save in progress, to heal or undo it.
  struct Rotation {
    std::shared_ptr<File> prev;
    uint64_t prev_generation = 0;
    uint64_t prev_end = 0;
    std::string prev_name;
    uint64_t first_lsn = 0;
    bool healing = false;
    bool active = false;
  } rot_ GUARDED_BY(write_mu_);

  // Small shared state for the sync thread and waiters.
  mutable base::Mutex state_mu_;
  base::CondVar work_cv_;     // wakes the sync thread
  base::CondVar durable_cv_;  // wakes waiters
  base::CondVar drain_cv_;    // in_flight_ reached 0
  // The file the sync thread syncs last.
  std::shared_ptr<File> sync_cur_ GUARDED_BY(state_mu_);
  // Rotated out, synced then closed.
  std::vector<std::shared_ptr<File>> old_files_ GUARDED_BY(state_mu_);
  bool dir_dirty_ GUARDED_BY(state_mu_) = false;
  // Contiguous: every record <= it is fully written.
  uint64_t written_lsn_ GUARDED_BY(state_mu_) = 0;
  uint64_t reserved_lsn_ GUARDED_BY(state_mu_) = 0;  // the last LSN handed out
  // Written LSNs > written_lsn_ + 1 (out of order), a min-heap.
  std::vector<uint64_t> done_ GUARDED_BY(state_mu_);
  uint64_t in_flight_ GUARDED_BY(state_mu_) = 0;  // reserved, write not finished
  // The first failed record (UINT64_MAX: none): nothing from it on is written.
  uint64_t fail_lsn_ GUARDED_BY(state_mu_) = UINT64_MAX;
  uint64_t fail_off_ GUARDED_BY(state_mu_) = 0;
  std::shared_ptr<File> fail_file_ GUARDED_BY(state_mu_);
  bool fail_truncated_ GUARDED_BY(state_mu_) = false;
  // An fdatasync failed: only a snapshot heals.
  bool sync_failed_ GUARDED_BY(state_mu_) = false;
  // The largest LSN whose append reported success.
  uint64_t max_ok_lsn_ GUARDED_BY(state_mu_) = 0;
  uint64_t resumes_ GUARDED_BY(state_mu_) = 0;
  uint64_t recycled_ GUARDED_BY(state_mu_) = 0;
  uint64_t durable_lsn_ GUARDED_BY(state_mu_) = 0;
  uint64_t requested_lsn_ GUARDED_BY(state_mu_) = 0;
  uint64_t generation_seen_ GUARDED_BY(state_mu_) = 0;
  uint64_t bytes_ GUARDED_BY(state_mu_) = 0;
  uint64_t appended_ GUARDED_BY(state_mu_) = 0;
  uint64_t syncs_ GUARDED_BY(state_mu_) = 0;
  uint64_t sync_us_ GUARDED_BY(state_mu_) = 0;
  uint64_t sync_hist_[kSyncHistBuckets] GUARDED_BY(state_mu_) = {};
  void RecordSyncLocked(uint64_t us) REQUIRES(state_mu_);
  Status broken_ GUARDED_BY(state_mu_);
  bool stop_ GUARDED_BY(state_mu_) = false;
  std::thread thread_;
};

}  // namespace pion::persist
