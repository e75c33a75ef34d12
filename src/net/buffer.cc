#include "net/buffer.h"

#include <cstdlib>
#include <utility>

#include "base/check.h"

namespace pion::net {

namespace {

size_t RoundCapacity(size_t size) {
  size_t quantum = size >= (64u << 10) ? 4096 : kIoBufAlign;
  return (size + quantum - 1) / quantum * quantum;
}

}  // namespace

IoBuf::IoBuf(size_t size) {
  if (size == 0) return;
  capacity_ = RoundCapacity(size);
  data_ = static_cast<char*>(std::aligned_alloc(kIoBufAlign, capacity_));
  PION_CHECK_MSG(data_ != nullptr, "out of memory");
}

IoBuf IoBuf::TryAllocate(size_t size) {
  IoBuf b;
  if (size == 0) return b;
  size_t cap = RoundCapacity(size);
  if (cap < size) return b;  // overflow
  b.data_ = static_cast<char*>(std::aligned_alloc(kIoBufAlign, cap));
  if (b.data_ != nullptr) b.capacity_ = cap;
  return b;
}

IoBuf IoBuf::TakeRecycled(size_t size) {
  IoBuf b;
  auto [data, cap] = BufferRecycler::Global().Take(size);
  b.data_ = static_cast<char*>(data);
  b.capacity_ = cap;
  return b;
}

IoBuf::~IoBuf() { std::free(data_); }

IoBuf& IoBuf::operator=(IoBuf&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}

IoBuf BufferPool::TakeCached(size_t size) {
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= 2 * size + 4096) {
    IoBuf b = std::move(it->second);
    cached_ -= it->first;
    free_.erase(it);
    return b;
  }
  return IoBuf();
}

IoBuf BufferPool::Get(size_t size) {
  IoBuf b = TakeCached(size);
  return b.empty() ? IoBuf(size) : std::move(b);
}

IoBuf BufferPool::TryGet(size_t size) {
  IoBuf b = TakeCached(size);
  return b.empty() ? IoBuf::TryAllocate(size) : std::move(b);
}

void BufferPool::Put(IoBuf buf) {
  size_t cap = buf.capacity();
  if (cap == 0) return;
  if (cap > max_cached_) return;  // freed by ~IoBuf
  // Make room by dropping the smallest cached buffers first: big buffers are
  // the ones whose first touch is expensive.
  while (cached_ + cap > max_cached_ && !free_.empty()) {
    auto it = free_.begin();
    if (it->first >= cap) return;  // everything cached is at least as useful
    cached_ -= it->first;
    free_.erase(it);
  }
  cached_ += cap;
  free_.emplace(cap, std::move(buf));
}

}  // namespace pion::net
