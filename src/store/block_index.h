// BlockTable: a namespace's block hashes (the logged record,
// persist::BlockRecord) and the membership index built over them.
//
// Thread-safety: built (Finish) by one thread, then read-only and shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "persist/records.h"
#include "store/index_seed.h"

namespace pion::store {

// block_size and hashes (registration, i.e. token, order) are the logged
// record (persist::BlockRecord); the membership index is the store's.
struct BlockTable : persist::BlockRecord {
  // Builds the membership index from `hashes`: an open-addressing hash set
  // (linear probing, load <= 0.5) that fits in L1/L2 for typical tables (1,562
  // hashes -> 32 KiB), so a probe costs about one cache hit instead of log2(N)
  // dependent branches. Slots come from a mixing of the hash with a
  // per-process random secret (Slot), so hashes chosen by a client cannot be
  // made to collide (the values are client-supplied; a public multiplier let
  // 64k crafted hashes cost 2^31 probes).
  void Finish();
  bool finished() const { return finished_; }
  // A finished table holding `r`'s block size and hashes.
  static std::shared_ptr<const BlockTable> Finished(const persist::BlockRecord& r);
  // True iff `h` is in the table. Expected O(1). REQUIRES: finished().
  bool Contains(uint64_t h) const;
  // KV.PREFIX.MEMBERSHIP's probe: `n` hashes of 8 bytes each (native byte
  // order, unaligned) at `probes`; sets bit i of `bitmap` (LSB first, (n+7)/8
  // bytes the caller zeroed) iff hash i is in the table. The same answers as
  // Contains (the reference), eight probes at a time: their slots are computed
  // and their first cache lines prefetched before any is read, so the eight
  // index reads overlap instead of following one another. REQUIRES: finished().
  void ContainsEach(const uint8_t* probes, size_t n, uint8_t* bitmap) const;

  // Probe statistics of the last Finish(), for tests and INFO: slots examined
  // by all inserts, and the longest run of occupied slots (bounds any lookup).
  uint64_t build_probes() const { return build_probes_; }
  uint64_t max_run() const { return max_run_; }
  // The first 8 bytes of the KV.PREFIX.BLOCKS reply (u32 block_size ‖ u32
  // hash count, in the hashes' native order), set by Finish(), so that the
  // reply can be sent by reference: these, then `hashes`.
  std::span<const uint8_t, 8> reply_head() const { return std::span<const uint8_t, 8>(head_); }
  // Heap bytes held by the table (hashes and index); counted in vstore_bytes.
  uint64_t MemoryBytes() const {
    return (hashes.capacity() + index_.capacity()) * sizeof(uint64_t);
  }

 private:
  // The slot of hash `h`: the top index_bits_ bits of a 64-bit finalizer
  // (MurmurHash3's fmix64, a bijection with full avalanche) of h XOR the
  // process's secret, inline because a probe is little more than this.
  size_t Slot(uint64_t h) const {
    return static_cast<size_t>(SecretMix(h, seed_) >> (64 - index_bits_));
  }
  std::vector<uint64_t> index_;  // 0 = empty slot (hash 0 is tracked by has_zero_)
  uint64_t seed_ = 0;            // the process's index secret, copied by Finish()
  uint32_t index_bits_ = 0;
  bool has_zero_ = false;
  bool finished_ = false;
  uint64_t build_probes_ = 0;
  uint64_t max_run_ = 0;
  uint8_t head_[8] = {};
};

}  // namespace pion::store
