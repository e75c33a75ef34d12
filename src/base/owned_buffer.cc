#include "base/owned_buffer.h"

#include <cstdlib>

namespace pion {

BufferRecycler& BufferRecycler::Global() {
  static BufferRecycler* r = new BufferRecycler(0);  // never destroyed: used until exit
  return *r;
}

void BufferRecycler::Put(void* data, size_t capacity) {
  if (data == nullptr) return;
  if (capacity >= kMinBytes) {
    std::lock_guard<std::mutex> l(mu_);
    if (capacity >= kMinBytes && capacity <= max_) {
      TrimLocked(max_ - capacity);
      cached_ += capacity;
      free_.emplace(capacity, data);
      return;
    }
  }
  std::free(data);
}

std::pair<void*, size_t> BufferRecycler::Take(size_t size) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = free_.lower_bound(size);
  if (it == free_.end() || it->first > 2 * size + 4096) {
    ++misses_;
    return {nullptr, 0};
  }
  std::pair<void*, size_t> out{it->second, it->first};
  cached_ -= it->first;
  free_.erase(it);
  ++hits_;
  return out;
}

void BufferRecycler::TrimLocked(size_t limit) {
  while (cached_ > limit && !free_.empty()) {
    auto it = free_.begin();
    cached_ -= it->first;
    std::free(it->second);
    free_.erase(it);
  }
}

void BufferRecycler::set_max_bytes(size_t n) {
  std::lock_guard<std::mutex> l(mu_);
  max_ = n;
  TrimLocked(n);
}

size_t BufferRecycler::max_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return max_;
}

size_t BufferRecycler::cached_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return cached_;
}

uint64_t BufferRecycler::hits() const {
  std::lock_guard<std::mutex> l(mu_);
  return hits_;
}

uint64_t BufferRecycler::misses() const {
  std::lock_guard<std::mutex> l(mu_);
  return misses_;
}

void BufferRecycler::Clear() {
  std::lock_guard<std::mutex> l(mu_);
  TrimLocked(0);
}

}  // namespace pion
