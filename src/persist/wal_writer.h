// WalWriter: appends store mutations to the write-ahead log
// (docs/wal_format.md) and makes them durable according to the fsync policy.
// It is the store's MutationSink.
//
// Appending frames a record and writes it (pwrite at the file's end) under
// write_mu_; nothing in an append waits for the disk. A sync thread does every
// fdatasync, always for a contiguous prefix of LSNs, and publishes the durable
// LSN (group commit under `always`: one fdatasync serves every write that
// arrived meanwhile). Waiters block in WaitDurable or are told through the
// durable callback.
//
// A failed write (ENOSPC, EIO) is cut off again and returned to the store, which
// then applies nothing; later appends retry. A failed fdatasync is not
// retryable (the kernel may have dropped the dirty pages): the WAL becomes
// broken, every later append and wait fails, and reads continue.
//
// Known limitation: write_mu_ is held across the pwrite of a record's rows, so
// a small record (register, drop: logged under the store's global mutex) waits
// behind a large store record being copied into the page cache, and behind
// any dirty-page throttling of that write. TODO(persist): reserve offset + LSN
// under the mutex and write outside it, with space preallocated (fallocate) so
// that ENOSPC can only happen at reservation and never leaves a hole.
//
// Thread-safety: all public methods may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "persist/env.h"
#include "persist/wal_format.h"
#include "store/mutation.h"

namespace pion::persist {

enum class SyncPolicy : uint8_t { kAlways, kEverySec, kNo };

struct WalStats {
  uint64_t generation = 0;
  uint64_t bytes = 0;     // size of the active WAL file
  uint64_t appended = 0;  // records appended since open or the last compaction
  uint64_t last_lsn = 0;
  uint64_t durable_lsn = 0;
  uint64_t syncs = 0;
  bool broken = false;
};

class WalWriter final : public store::MutationSink {
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
  void Start();

  // store::MutationSink
  Result<uint64_t> OnRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                              quant::Format fmt, const store::BlockTable* blocks) override;
  Result<uint64_t> OnStore(std::string_view ns, uint64_t incarnation, store::Side side,
                           uint32_t layer, uint64_t start, uint64_t count,
                           std::span<const uint8_t> stored) override;
  Result<uint64_t> OnDrop(std::string_view ns, uint64_t incarnation,
                          store::DropReason reason) override;
  Result<uint64_t> OnFlushAll() override;

  // Snapshot barrier (no appends run meanwhile): every later record goes to a
  // new file "<base>.<G>" of generation G = current + 1. Sets G, the new file's
  // first LSN and its name.
  Status Rotate(const std::string& base, uint64_t* generation, uint64_t* first_lsn,
                std::string* name);
  // The active generation and the LSN the next record will get.
  void Position(uint64_t* generation, uint64_t* next_lsn);
  // After the snapshot of the active generation is durable: renames the active
  // file to `final_name`, removes `obsolete` files, syncs the directory.
  Status FinishRotation(const std::string& final_name, const std::vector<std::string>& obsolete);

  // Durability.
  uint64_t last_lsn() const;
  uint64_t durable_lsn() const;
  // True if replies wait for their LSN (policy always).
  bool AckWaitsForSync() const { return policy_.load() == SyncPolicy::kAlways; }
  // Blocks until `lsn` is durable; an error if the WAL broke first.
  Status WaitDurable(uint64_t lsn);
  // Asks for a sync of everything appended so far; returns the LSN to wait for.
  uint64_t RequestSync();
  // RequestSync + WaitDurable (KV.PREFIX.COMMIT, shutdown).
  Status Commit();
  // Told the LSN up to which replies may be sent: by the sync thread after each
  // sync (the durable LSN) and, unless the policy is `always`, by every append
  // (its own LSN: replies do not wait). Values may repeat or arrive out of order
  // between the two sources; the receiver keeps the maximum. Set before Start().
  void SetAckCallback(std::function<void(uint64_t)> cb) { on_ack_ = std::move(cb); }
  void SetPolicy(SyncPolicy p);
  SyncPolicy policy() const { return policy_.load(); }
  WalStats Stats() const;
  const std::string& active_name() const { return active_name_; }

 private:
  struct File {
    std::string name;
    std::unique_ptr<WritableFile> f;
  };
  Result<uint64_t> Append(RecordType t, std::span<const uint8_t> prefix,
                          std::span<const uint8_t> rows);
  void SyncLoop();
  Status BrokenLocked() const;

  Env* env_;
  std::string dir_;
  std::atomic<SyncPolicy> policy_;
  std::function<void(uint64_t)> on_ack_;

  // Serialises appends and rotations.
  std::mutex write_mu_;
  std::shared_ptr<File> cur_;     // guarded by write_mu_ (and state_mu_ to change)
  uint64_t generation_ = 0;       // guarded by write_mu_
  uint64_t next_lsn_ = 1;         // guarded by write_mu_
  uint64_t end_ = 0;              // guarded by write_mu_
  std::vector<uint8_t> scratch_;  // guarded by write_mu_
  std::string active_name_;       // guarded by write_mu_

  // Small shared state for the sync thread and waiters.
  mutable std::mutex state_mu_;
  std::condition_variable work_cv_;               // wakes the sync thread
  std::condition_variable durable_cv_;            // wakes waiters
  std::shared_ptr<File> sync_cur_;                // the file the sync thread syncs last
  std::vector<std::shared_ptr<File>> old_files_;  // rotated out, synced then closed
  bool dir_dirty_ = false;
  uint64_t written_lsn_ = 0;
  uint64_t durable_lsn_ = 0;
  uint64_t requested_lsn_ = 0;
  uint64_t generation_seen_ = 0;
  uint64_t bytes_ = 0;
  uint64_t appended_ = 0;
  uint64_t syncs_ = 0;
  Status broken_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace pion::persist
