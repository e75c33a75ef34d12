// The block index: see block_index.h.
#include "store/block_index.h"

#include <algorithm>
#include <cstring>

namespace pion::store {

bool BlockTable::Contains(uint64_t h) const {
  if (h == 0) return has_zero_;
  if (index_.empty()) return false;
  const size_t mask = index_.size() - 1;
  size_t i = Slot(h);
  while (true) {
    uint64_t v = index_[i];
    if (v == h) return true;
    if (v == 0) return false;
    i = (i + 1) & mask;
  }
}

void BlockTable::ContainsEach(const uint8_t* probes, size_t n, uint8_t* bitmap) const {
  if (index_.empty()) {  // no hashes, or only 0
    for (size_t i = 0; i < n; ++i) {
      uint64_t h;
      std::memcpy(&h, probes + 8 * i, 8);
      if (h == 0 && has_zero_) bitmap[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
    }
    return;
  }
  const size_t mask = index_.size() - 1;
  const uint64_t* index = index_.data();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {  // one bitmap byte per group
    uint64_t h[8];
    size_t slot[8];
    std::memcpy(h, probes + 8 * i, sizeof(h));
    for (int j = 0; j < 8; ++j) {
      slot[j] = Slot(h[j]);
      __builtin_prefetch(index + slot[j]);
    }
    unsigned bits = 0;
    for (int j = 0; j < 8; ++j) {
      bool hit;
      if (h[j] == 0) {
        hit = has_zero_;
      } else {
        size_t s = slot[j];
        for (;;) {
          const uint64_t v = index[s];
          if (v == h[j] || v == 0) {
            hit = v != 0;
            break;
          }
          s = (s + 1) & mask;
        }
      }
      bits |= static_cast<unsigned>(hit) << j;
    }
    bitmap[i >> 3] |= static_cast<uint8_t>(bits);
  }
  for (; i < n; ++i) {
    uint64_t h;
    std::memcpy(&h, probes + 8 * i, 8);
    if (Contains(h)) bitmap[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
  }
}

std::shared_ptr<const BlockTable> BlockTable::Finished(const persist::BlockRecord& r) {
  auto t = std::make_shared<BlockTable>();
  t->block_size = r.block_size;
  t->hashes = r.hashes;
  t->Finish();
  return t;
}

void BlockTable::Finish() {
  // What is held is what is counted (MemoryBytes). shrink_to_fit() is a no-op
  // in libstdc++ without exceptions, so copy when there is slack.
  if (hashes.capacity() > hashes.size())
    hashes = std::vector<uint64_t>(hashes.begin(), hashes.end());
  seed_ = IndexSeed();
  index_bits_ = 4;
  while ((size_t{1} << index_bits_) < 2 * hashes.size()) ++index_bits_;
  index_.assign(size_t{1} << index_bits_, 0);
  has_zero_ = false;
  build_probes_ = 0;
  const size_t mask = index_.size() - 1;
  for (uint64_t h : hashes) {
    if (h == 0) {
      has_zero_ = true;
      continue;
    }
    size_t i = Slot(h);
    ++build_probes_;
    while (index_[i] != 0 && index_[i] != h) {
      i = (i + 1) & mask;
      ++build_probes_;
    }
    index_[i] = h;
  }
  // Longest run of occupied slots, wrapping around (the table is at most half
  // full, so there is always an empty slot).
  max_run_ = 0;
  size_t first_empty = 0;
  while (index_[first_empty] != 0) ++first_empty;
  uint64_t run = 0;
  for (size_t k = 1; k <= index_.size(); ++k) {
    if (index_[(first_empty + k) & mask] != 0) {
      max_run_ = std::max(max_run_, ++run);
    } else {
      run = 0;
    }
  }
  const uint32_t head[2] = {block_size, static_cast<uint32_t>(hashes.size())};
  std::memcpy(head_, head, sizeof(head_));
  finished_ = true;
}

}  // namespace pion::store
