#include "attend/slot_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <iterator>

namespace pion::attend {

namespace {
constexpr size_t kAlign = 64;
size_t PageSize() {
  static const size_t p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}
}  // namespace

uint8_t* SlotArena::AllocateFresh(size_t bytes, size_t* capacity) {
  // The capacity alone tells FreeBuffer how a buffer was made: mapped ones are
  // >= kMapBytes, allocated ones below it.
  const size_t cap64 = (bytes + kAlign - 1) / kAlign * kAlign;
  if (cap64 >= kMapBytes) {
    const size_t pg = PageSize();
    const size_t cap = (bytes + pg - 1) / pg * pg;
    void* p = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    *capacity = cap;
    return static_cast<uint8_t*>(p);
  }
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlign, cap64));
  if (p != nullptr) *capacity = cap64;
  return p;
}

void SlotArena::FreeBuffer(uint8_t* p, size_t capacity) {
  if (p == nullptr) return;
  if (capacity >= kMapBytes) {
    ::munmap(p, capacity);
  } else {
    std::free(p);
  }
}

SlotArena::~SlotArena() { FreeAll(&kept_); }

void SlotArena::FreeAll(Kept* k) {
  for (auto& [cap, p] : *k) FreeBuffer(p, cap);
  k->clear();
}

uint8_t* SlotArena::Allocate(size_t bytes, size_t* capacity) {
  Kept drop;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = kept_.lower_bound(bytes);
    if (it != kept_.end() && it->first <= bytes + bytes / 8) {
      uint8_t* p = it->second;
      *capacity = it->first;
      kept_bytes_ -= it->first;
      kept_.erase(it);
      ++reused_;
      return p;
    }
    ++fresh_;
    // Room for the new buffer within the limit: kept + bytes <= keep_limit.
    TrimLocked(keep_limit_ > bytes ? keep_limit_ - bytes : 0, &drop);
  }
  FreeAll(&drop);
  return AllocateFresh(bytes, capacity);
}

void SlotArena::Release(uint8_t* p, size_t capacity) {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (kept_bytes_ + capacity <= keep_limit_) {
      kept_.emplace(capacity, p);
      kept_bytes_ += capacity;
      return;
    }
  }
  FreeBuffer(p, capacity);
}

void SlotArena::TrimLocked(uint64_t limit, Kept* out) {
  while (kept_bytes_ > limit && !kept_.empty()) {
    auto it = std::prev(kept_.end());
    kept_bytes_ -= it->first;
    out->emplace(it->first, it->second);
    kept_.erase(it);
  }
}

void SlotArena::SetKeepLimit(uint64_t bytes) {
  Kept drop;
  {
    std::lock_guard<std::mutex> l(mu_);
    keep_limit_ = bytes;
    TrimLocked(bytes, &drop);
  }
  FreeAll(&drop);
}

uint64_t SlotArena::keep_limit() const {
  std::lock_guard<std::mutex> l(mu_);
  return keep_limit_;
}

void SlotArena::Clear() {
  Kept drop;
  {
    std::lock_guard<std::mutex> l(mu_);
    drop.swap(kept_);
    kept_bytes_ = 0;
  }
  FreeAll(&drop);
}

SlotArenaStats SlotArena::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  SlotArenaStats s;
  s.kept_bytes = kept_bytes_;
  s.kept_buffers = kept_.size();
  s.reused = reused_;
  s.fresh = fresh_;
  s.keep_limit = keep_limit_;
  return s;
}

}  // namespace pion::attend
