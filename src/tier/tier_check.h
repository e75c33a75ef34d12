// Verifies a disk tier file (docs/tier_format.md §4): walks it block by block,
// skipping holes, and checks every extent it finds (header fields, header CRC,
// value CRC). Blocks that are neither a hole, zero, nor part of an extent are
// stray data. pion-check prints the report; a damaged extent makes it fail.
//
// The walk reads through a TierSource, so the same code runs over a file (holes
// found with SEEK_DATA / SEEK_HOLE) and over bytes in memory (the fuzz target).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace pion::tier {

// What the checker reads: a length, positional reads, and where data resumes.
class TierSource {
 public:
  virtual ~TierSource() = default;
  virtual uint64_t size() const = 0;
  // Reads up to n bytes at off; fewer only at the end of the source.
  virtual Result<size_t> ReadAt(uint64_t off, size_t n, uint8_t* out) const = 0;
  // The first offset >= off that may hold data (size() when only holes follow).
  // A source that cannot tell returns off.
  virtual uint64_t NextData(uint64_t off) const = 0;
};

// Bytes in memory: no holes.
class MemoryTierSource : public TierSource {
 public:
  MemoryTierSource(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint64_t size() const override { return n_; }
  Result<size_t> ReadAt(uint64_t off, size_t n, uint8_t* out) const override;
  uint64_t NextData(uint64_t off) const override { return off; }

 private:
  const uint8_t* p_;
  size_t n_;
};

struct TierDamage {
  uint64_t offset = 0;  // of the extent's header block
  std::string reason;
  std::string key;  // from the header, when its CRC passed
};

struct TierStray {
  uint64_t offset = 0;  // a run of consecutive stray blocks
  uint64_t bytes = 0;
};

struct TierCheckReport {
  uint64_t file_bytes = 0;    // the file's length (holes included)
  uint64_t extents = 0;       // well-formed extents
  uint64_t extent_bytes = 0;  // their length, headers and padding included
  uint64_t value_bytes = 0;   // their values
  uint64_t hole_bytes = 0;    // skipped as holes
  uint64_t zero_bytes = 0;    // allocated blocks holding only zeros
  uint64_t stray_bytes = 0;
  std::vector<TierDamage> damaged;
  std::vector<TierStray> stray;
  bool ok() const { return damaged.empty(); }
};

// Walks the whole source. Errors only for an I/O failure; damage is in the report.
Status CheckTier(const TierSource& src, TierCheckReport* report);
// Opens a tier file (read only) and walks it.
Status CheckTierFile(const std::string& path, TierCheckReport* report);

}  // namespace pion::tier
