// FaultEnv: an in-memory Env for durability tests (LevelDB's
// fault_injection_test, SQLite's test6.c). It remembers, per file, the bytes as
// of its last Sync and, per directory, the entries as of its last SyncDir, and
// can:
//  * fail the Nth write (optionally after writing part of it) or the Nth sync
//    with an I/O error such as "No space left on device";
//  * simulate a crash right after the Nth sync (file Sync or SyncDir): the
//    "disk image" a power cut at that moment would leave is recorded (unsynced
//    bytes dropped, garbled or partly kept, unsynced directory changes undone),
//    and every later operation fails, so nothing after the crash point can be
//    acknowledged.
// A new FaultEnv built from an image is the machine after the reboot.
//
// Thread-safety: every method takes one mutex; safe for concurrent use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "persist/env.h"

namespace pion::persist {

// path -> contents
using DiskImage = std::map<std::string, std::vector<uint8_t>>;

enum class CrashMode : uint8_t {
  kDropUnsynced,    // unsynced appended bytes vanish
  kGarbleUnsynced,  // they become random bytes (a random length of them)
  kPartialUnsynced  // a random prefix of them survives
};

class FaultEnv final : public Env {
 public:
  explicit FaultEnv(uint64_t seed = 1);
  // A machine whose disk holds `image` (everything durable).
  FaultEnv(const DiskImage& image, uint64_t seed);
  ~FaultEnv() override;

  // Fault injection. Counters count calls made after the setter.
  void FailNthWrite(uint64_t n, bool partial = true,
                    std::string_view msg = "No space left on device");
  void FailNthSync(uint64_t n, std::string_view msg = "Input/output error");
  // While full, every write fails (writing half of its bytes when `partial`)
  // with `msg`, as on a full disk; SetDiskFull(false) frees space again.
  void SetDiskFull(bool full, bool partial = true,
                   std::string_view msg = "No space left on device");
  void CrashAfterNthSync(uint64_t n, CrashMode mode);

  bool crashed() const;
  uint64_t syncs() const;  // total Sync + SyncDir calls so far
  uint64_t writes() const;
  // The disk after the crash (valid once crashed()).
  DiskImage crash_image() const;
  // The current contents as readers see them (no crash).
  DiskImage Snapshot() const;
  // Direct access for corrupting files in tests.
  void SetFile(const std::string& path, std::vector<uint8_t> bytes);  // durable
  std::vector<uint8_t> GetFile(const std::string& path) const;

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> ReopenWritableFile(const std::string& path) override;
  Result<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  Result<uint64_t> FileSize(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status TruncateFile(const std::string& path, uint64_t size) override;
  Status SyncDir(const std::string& dir) override;
  Result<std::vector<std::string>> ListDir(const std::string& dir) override;
  Status CreateDir(const std::string& dir) override;
  // A copy of the file's current bytes in page-aligned memory (as a mapping
  // would be), unless SetMappable(false).
  Result<std::shared_ptr<const MappedFile>> MapReadOnly(const std::string& path) override;
  void SetMappable(bool on);
  uint64_t maps() const;  // successful MapReadOnly calls
  // True while the mapping returned last is still referenced (by chunks).
  bool LastMapInUse() const;
  // [begin, end) of the mapping returned last.
  std::pair<const uint8_t*, const uint8_t*> LastMapRange() const;

  struct Node {
    std::vector<uint8_t> data;
    std::vector<uint8_t> synced;
  };

 private:
  friend class FaultWritableFile;
  friend class FaultReadableFile;
  using NodePtr = std::shared_ptr<Node>;

  Status DeadLocked() const;
  Status WriteLocked(const NodePtr& n, const std::string& path, uint64_t off,
                     std::span<const uint8_t> data);
  Status SyncLocked(const NodePtr& n, const std::string& path);
  void AfterSyncLocked();
  void TakeImageLocked(CrashMode mode);

  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::map<std::string, NodePtr> files_;    // current directory entries
  std::map<std::string, NodePtr> durable_;  // entries as of the last SyncDir
  uint64_t syncs_ = 0, writes_ = 0;
  bool mappable_ = true;
  uint64_t maps_ = 0;
  std::weak_ptr<const MappedFile> last_map_;
  std::pair<const uint8_t*, const uint8_t*> last_range_{nullptr, nullptr};
  uint64_t fail_write_at_ = 0, fail_sync_at_ = 0, crash_at_ = 0;
  bool fail_partial_ = true;
  bool full_ = false;
  std::string fail_write_msg_, fail_sync_msg_;
  CrashMode crash_mode_ = CrashMode::kDropUnsynced;
  bool dead_ = false;
  DiskImage image_;
};

}  // namespace pion::persist
