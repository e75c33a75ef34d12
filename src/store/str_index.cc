// See str_index.h.
#include "store/str_index.h"

#include <bit>

#include "base/check.h"

namespace pion::store {

namespace {
constexpr size_t kMinSlots = 16;
}  // namespace

StrIndex::StrIndex() : seed_(IndexSeed()) { Resize(kMinSlots); }

void StrIndex::Resize(size_t capacity) {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - static_cast<unsigned>(std::countr_zero(capacity));
  for (const Slot& s : old)
    if (s.entry != nullptr) Place(s.hash, s.entry);
}

void StrIndex::Place(uint64_t hash, StrEntry* e) {
  size_t i = Position(hash);
  while (slots_[i].entry != nullptr) i = (i + 1) & mask_;
  slots_[i] = Slot{hash, e};
}

void StrIndex::Insert(uint64_t hash, StrEntry* e) {
  if ((used_ + 1) * 2 > slots_.size()) Resize(slots_.size() * 2);
  Place(hash, e);
  ++used_;
}

void StrIndex::Erase(uint64_t hash, const StrEntry* e) {
  size_t i = Position(hash);
  while (slots_[i].entry != e) {
    PION_DCHECK(slots_[i].entry != nullptr);
    i = (i + 1) & mask_;
  }
  // Backward shift: each entry after the hole that may move to it (its home
  // is not cyclically within (hole, its slot]) moves, and the hole follows it.
  for (size_t j = (i + 1) & mask_; slots_[j].entry != nullptr; j = (j + 1) & mask_) {
    const size_t home = Position(slots_[j].hash);
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i] = Slot{};
  --used_;
  // Memory back after a mass removal (a quarter full at most after halving).
  if (slots_.size() > kMinSlots && used_ * 8 < slots_.size()) Resize(slots_.size() / 2);
}

void StrIndex::Clear() {
  used_ = 0;
  slots_.clear();
  slots_.shrink_to_fit();
  Resize(kMinSlots);
}

size_t StrIndex::LongestRun() const {
  size_t best = 0, run = 0;
  // Twice around, so that a run wrapping past the end is counted whole (the
  // table is at most half full: there is an empty slot).
  for (size_t k = 0; k < 2 * slots_.size(); ++k) {
    run = slots_[k & mask_].entry != nullptr ? run + 1 : 0;
    if (run > best) best = run;
  }
  return best;
}

}  // namespace pion::store
