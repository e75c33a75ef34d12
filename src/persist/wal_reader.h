// WalReader: reads one WAL file record by record and classifies how it ends
// (docs/wal_format.md §5): cleanly, with a torn tail, or with corruption (a bad
// record followed by a valid one). Like LevelDB's log::Reader it does not
// decide what a problem means: the caller (recovery, pion-check) does.
//
// Thread-safety: one reader per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "persist/env.h"
#include "persist/wal_format.h"

namespace pion::persist {

struct WalRecord {
  RecordType type = RecordType::kFlushAll;
  uint64_t lsn = 0;
  uint64_t offset = 0;               // of the record header
  std::span<const uint8_t> payload;  // valid until the next call to Next
};

enum class WalEnd : uint8_t {
  kClean,    // end of file, or only zero bytes (preallocated) follow
  kTorn,     // a bad record with no valid record after it
  kCorrupt,  // a bad record followed by a valid one
  kStale,    // only records of an earlier generation follow (a recycled file's old contents)
};

class WalReader {
 public:
  // Opens `path` and checks its header (Corruption if it is bad, NotFound if absent).
  static Result<std::unique_ptr<WalReader>> Open(Env* env, const std::string& path);

  const WalHeader& header() const { return header_; }
  uint64_t file_size() const { return size_; }
  // The next valid record, or false at the end of the valid records (then see
  // end(), end_offset(), reason()). An I/O error ends reading with `status()`.
  bool Next(WalRecord* rec);

  WalEnd end() const { return end_; }
  // Offset of the first byte after the last valid record.
  uint64_t end_offset() const { return pos_; }
  // What was wrong at end_offset() (empty for kClean).
  const std::string& reason() const { return reason_; }
  // Offset of the valid record found after the bad one (kCorrupt), or of the
  // first record of an earlier generation (kStale).
  uint64_t resync_offset() const { return resync_; }
  // kStale: the generation the stale records after end_offset() belong to.
  uint64_t stale_generation() const { return stale_gen_; }
  const Status& status() const { return io_; }
  uint64_t next_lsn() const { return expect_lsn_; }

 private:
  WalReader(std::unique_ptr<ReadableFile> f, uint64_t size, WalHeader h);
  // Reads and checks the record at `off` expecting lsn in [min_lsn, max_lsn];
  // on success fills buf_ and *rec. `why` gets the reason for a failure.
  bool TryRecord(uint64_t off, uint64_t min_lsn, uint64_t max_lsn, WalRecord* rec,
                 std::string* why);
  bool AllZeroFrom(uint64_t off);
  // For a record header `hdr` at `off` that passed the cheap checks (type,
  // reserved bytes): the generation below this file's (at most 16 back) whose
  // seed makes the record pass its CRC, if its LSN is below this file's first
  // LSN; 0 if none. The payload read is taken from *budget (0 if it does not
  // fit), which bounds what a search through garbage can cost.
  uint64_t StaleRecordGeneration(uint64_t off, const uint8_t* hdr, uint64_t* budget);
  void Classify(const std::string& why);

  std::unique_ptr<ReadableFile> f_;
  uint64_t size_;
  WalHeader header_;
  uint64_t pos_ = kWalHeaderSize;
  uint64_t expect_lsn_;
  std::vector<uint8_t> buf_;
  WalEnd end_ = WalEnd::kClean;
  std::string reason_;
  uint64_t resync_ = 0;
  uint64_t stale_gen_ = 0;
  Status io_;
  bool done_ = false;
};

}  // namespace pion::persist
