// The disk tier's file (docs/tier_format.md): extents of 4 KiB blocks in one
// O_DIRECT file, each holding one value behind a header with CRCs, and a
// read-only mapping of the whole file through which a written extent's value
// can be read in place.
//
// An Extent is held by shared_ptr: while any holder lives (the keyspace entry,
// a reply being sent from the mapping, a write in flight) its space is not
// reused; the last holder's release gives the blocks back and punches them out.
//
// Thread-safety: every TierFile method may be called from any thread (space is
// managed under an internal mutex; reads and writes are positional).
#pragma once

struct io_uring;

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/owned_buffer.h"
#include "base/status.h"

namespace pion::tier {

inline constexpr uint64_t kBlock = 4096;
inline constexpr uint32_t kHeaderFixed = 64;
inline constexpr char kMagic[8] = {'P', 'I', 'O', 'N', 'T', 'I', 'E', 'R'};
inline constexpr uint32_t kVersion = 1;
// The mapping reserves this much address space; tier-maxbytes may not exceed it.
inline constexpr uint64_t kMaxTierBytes = 16ull << 40;
inline constexpr const char* kFileName = "pion-tier.dat";

class TierFile;

struct Extent {
  std::shared_ptr<TierFile> file;  // kept open while any extent lives
  uint64_t offset = 0;
  uint64_t length = 0;        // allocated bytes (a multiple of kBlock)
  uint32_t header_bytes = 0;  // H
  uint64_t value_len = 0;     // V
  std::string key;            // the key in its header (the key it was written for)
  // Set once written (before `written`): the value's CRC-32C and the header's
  // sequence number, which a snapshot's reference to the extent repeats.
  uint32_t value_crc = 0;
  uint64_t seq = 0;
  std::atomic<bool> written{false};
  // Holds by snapshots (PinForSnapshot): while any, dropping the extent's
  // entry frees no space, so the tier drops other entries first.
  std::atomic<uint32_t> snapshot_pins{0};
  ~Extent();
  // The value's bytes in the mapping (valid once written).
  const uint8_t* mapped() const;
};
using ExtentRef = std::shared_ptr<Extent>;

// A snapshot's hold on a written extent (docs/tier_format.md §3): keeps it
// allocated and counted in Extent::snapshot_pins while the holder lives.
std::shared_ptr<const void> PinForSnapshot(ExtentRef x);

uint32_t HeaderBytes(size_t key_len);
uint64_t ExtentBytes(size_t key_len, uint64_t value_len);
// Fills `h` (header_bytes long, zeroed by the caller) for a value.
void EncodeHeader(uint8_t* h, uint32_t header_bytes, std::string_view key, uint64_t value_len,
                  uint32_t value_crc, uint64_t seq);
// Checks a header read from disk; on success sets *value_len and *key (a view into h).
Status DecodeHeader(const uint8_t* h, size_t avail, uint32_t* header_bytes, uint64_t* value_len,
                    std::string_view* key, uint32_t* value_crc);

// What a snapshot records of an extent (docs/snapshot_format.md §6) and a
// restart checks against the extent's header before adopting it.
struct ExtentId {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t header_bytes = 0;
  uint64_t value_len = 0;
  uint32_t value_crc = 0;
  uint64_t seq = 0;
};

class TierFile : public std::enable_shared_from_this<TierFile> {
 public:
  // Opens (creating) <dir>/pion-tier.dat, truncated to empty; with `adopt`,
  // kept as it is: its old length is set aside (nothing is allocated there)
  // until FinishAdopt, and Adopt takes extents a snapshot references from it
  // (docs/tier_format.md §3).
  static Result<std::shared_ptr<TierFile>> Open(const std::string& dir, uint64_t max_bytes,
                                                bool adopt = false);
  ~TierFile();
  TierFile(const TierFile&) = delete;
  TierFile& operator=(const TierFile&) = delete;

  // Space for a value, or null when the tier cannot hold it within max_bytes.
  ExtentRef Allocate(std::string_view key, uint64_t value_len);
  // Writes header + value at the extent (blocking: the tier's I/O threads call it).
  Status Write(Extent& x, const uint8_t* data, uint64_t n);
  // The same with the value gathered by `fill(offset, dst, len)`, which puts the
  // value's bytes [offset, offset + len) at dst (called in order, len > 0).
  using Filler = std::function<void(uint64_t offset, uint8_t* dst, uint64_t len)>;
  Status Write(Extent& x, const Filler& fill);
  // Reads the extent with one direct read, checks it and returns the buffer:
  // the extent starts at its beginning, or with `at`, at *at (the buffer may
  // then be a recycled block, BufferRecycler); the value at x.header_bytes after.
  Result<OwnedBuffer> Read(const Extent& x, size_t* at = nullptr);

  // Adopting (Open with adopt, before FinishAdopt): the extent `id` written
  // for `key` by an earlier process, after its header was read and matched
  // `id` (one header read; the value's CRC is checked by Read as always).
  // Corruption when the header does not match, the extent lies outside the
  // old file or overlaps one adopted before; OutOfBudget past max_bytes.
  Result<ExtentRef> Adopt(std::string_view key, const ExtentId& id);
  // Ends adoption: the old file's space no adopted extent holds becomes free
  // (punched out). Idempotent; a no-op without adopt.
  void FinishAdopt();
  // fdatasync of the file (before a snapshot that references it is renamed).
  Status Sync();
  // From now on freed extents are not punched out (the server is stopping:
  // a snapshot may still reference them for the next start).
  void KeepFreedExtents() { keep_freed_.store(true, std::memory_order_relaxed); }
  // Checks the extent `id` of the file at `path` for `key` as a restart would
  // and, with `check_value`, its value's CRC too (pion-check).
  static Status VerifyExtentAt(const std::string& path, std::string_view key, const ExtentId& id,
                               bool check_value);

  // The parts of Read for a caller that reads the extent itself (ReadRing):
  // a buffer for it (as Read's; the extent goes at *at when `at` is given),
  // the injected read failure it must honour, the rest of a short read, and
  // the check of the bytes read (header and the value's CRC).
  Result<OwnedBuffer> ReadBuffer(const Extent& x, size_t* at);
  bool TakeInjectedReadFailure() { return fail_reads_.load() > 0 && fail_reads_.fetch_sub(1) > 0; }
  Status ReadAt(uint8_t* p, uint64_t n, uint64_t at) { return PreadAll(p, n, at); }
  Status CheckRead(const Extent& x, const uint8_t* p) const;
  int fd() const { return fd_; }

  void set_max_bytes(uint64_t n);
  uint64_t max_bytes() const { return max_bytes_.load(std::memory_order_relaxed); }
  uint64_t used_bytes() const { return used_.load(std::memory_order_relaxed); }
  uint64_t extents() const { return extents_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }
  const uint8_t* map_base() const { return map_; }
  // How far the file can grow (the mapping reserved at open).
  uint64_t map_bytes() const { return map_bytes_; }
  // False on a file system without O_DIRECT (tmpfs): reads go through the page cache.
  bool direct() const { return direct_; }

  // Reads done in pieces through io_uring (the rest: one pread each).
  uint64_t piece_reads() const { return piece_reads_.load(std::memory_order_relaxed); }
  // Whether this thread can read in pieces (io_uring works here).
  static bool PieceReadsSupported();

  // Fault injection for tests: the next `n` writes (or reads) fail with EIO.
  void FailNextWrites(int n) { fail_writes_.store(n); }
  void FailNextReads(int n) { fail_reads_.store(n); }
  // Test hook: flips one byte of a written extent's value on disk.
  Status CorruptForTest(const Extent& x);

 private:
  friend struct Extent;
  TierFile() = default;
  void Free(uint64_t offset, uint64_t length);
  // Puts [offset, offset + length) back in the free runs (coalescing). REQUIRES mu_.
  void ReleaseLocked(uint64_t offset, uint64_t length);
  Status PwriteAll(const uint8_t* p, uint64_t n, uint64_t at);
  Status PreadAll(uint8_t* p, uint64_t n, uint64_t at);
  // CheckRead, with the value's CRC already computed where `value_crc` is set.
  Status CheckExtent(const Extent& x, const uint8_t* p, const uint32_t* value_crc) const;
  // A big extent read in pieces through the thread's io_uring, the value's CRC
  // computed as they arrive. kNotSupported: the ring refused (read with pread);
  // *abandon: the ring failed with reads in flight (never free `p`'s buffer).
  Status ReadPieces(io_uring* ring, const Extent& x, uint8_t* p, uint32_t* value_crc,
                    bool* abandon);

  std::string path_;
  int fd_ = -1;
  bool direct_ = true;
  uint8_t* map_ = nullptr;
  uint64_t map_bytes_ = 0;  // address space reserved for the mapping
  std::atomic<uint64_t> max_bytes_{0};
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> extents_{0};
  std::atomic<uint64_t> seq_{0};
  std::atomic<int> fail_writes_{0}, fail_reads_{0};
  std::atomic<uint64_t> piece_reads_{0};
  std::atomic<bool> keep_freed_{false};
  std::mutex mu_;
  bool adopting_ = false;                     // guarded by mu_
  uint64_t old_size_ = 0;                     // guarded by mu_: the old file's length
  uint64_t adopt_limit_ = 0;                  // guarded by mu_: that, rounded up to kBlock
  std::map<uint64_t, uint64_t> adopted_;      // guarded by mu_ while adopting: offset -> length
  uint64_t end_ = 0;                          // guarded by mu_: first never-used offset
  std::map<uint64_t, uint64_t> free_by_off_;  // guarded by mu_: offset -> length
  std::multimap<uint64_t, uint64_t> free_by_len_;  // guarded by mu_: length -> offset
};

}  // namespace pion::tier
