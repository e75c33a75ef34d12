// StrIndex: a shard's string entries by their key's hash, in one flat array,
// beside the shard's map (which owns the entries). A lookup of many keys at
// once (KV.BLOCK.MATCH) reads one slot per key, whose address it knows from
// the hash alone, then the entry: every key's reads can be issued before any
// is used, where the map's bucket list makes each read wait for the last.
//
// Open addressing with linear probing, at most half full (a probe ends at an
// empty slot within a few steps), backward-shift deletion (no tombstones).
// A slot is chosen by the top bits of SecretMix(hash, IndexSeed()), so keys
// chosen for their public XXH3 cannot be made to share a run. Equal hashes of
// different keys are all kept; the caller compares keys.
//
// Thread-safety: none; the shard's mutex guards it as it guards the map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "store/index_seed.h"

namespace pion::store {

struct StrEntry;

class StrIndex {
 public:
  struct Slot {
    uint64_t hash = 0;
    StrEntry* entry = nullptr;  // null: empty
  };

  StrIndex();
  // Adds `e`, whose key hashes to `hash` (not in the index yet).
  void Insert(uint64_t hash, StrEntry* e);
  // Removes `e` (in the index under `hash`).
  void Erase(uint64_t hash, const StrEntry* e);
  void Clear();
  size_t size() const { return used_; }
  // Heap bytes held (the slot array).
  uint64_t MemoryBytes() const { return slots_.capacity() * sizeof(Slot); }

  // The slot a probe for `hash` starts at (for prefetching), and the probe:
  // the first entry under `hash` at or after that slot for which `same(e)`
  // is true (the caller's key comparison), or null.
  const Slot* Home(uint64_t hash) const { return &slots_[Position(hash)]; }
  template <class Same>
  StrEntry* Find(uint64_t hash, Same&& same) const {
    for (size_t i = Position(hash);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.entry == nullptr) return nullptr;
      if (s.hash == hash && same(s.entry)) return s.entry;
    }
  }

  // The longest run of occupied slots (bounds any probe), for tests.
  size_t LongestRun() const;

 private:
  size_t Position(uint64_t hash) const {
    return static_cast<size_t>(SecretMix(hash, seed_) >> shift_);
  }
  // Rebuilds with `capacity` slots (a power of two, at least twice used_).
  void Resize(size_t capacity);
  void Place(uint64_t hash, StrEntry* e);

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t used_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace pion::store
