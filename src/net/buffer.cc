#include "net/buffer.h"

#include <algorithm>
#include <bit>
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
  if (size == 0) size = 1;
  // The smallest fitting buffer no larger than 2 * size + 4 KiB: classes from
  // size's up to the limit's; within a class the most recently cached first
  // (its memory is the warmest).
  const size_t limit = 2 * size + 4096;
  for (size_t c = std::max<size_t>(std::bit_width(size), lowest_);
       c < kClasses && c <= static_cast<size_t>(std::bit_width(limit)); ++c) {
    std::vector<IoBuf>& v = free_[c];
    for (size_t i = v.size(); i-- > 0;) {
      size_t cap = v[i].capacity();
      if (cap < size || cap > limit) continue;
      IoBuf b = std::move(v[i]);
      if (i + 1 != v.size()) v[i] = std::move(v.back());
      v.pop_back();
      cached_ -= cap;
      return b;
    }
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
  const size_t cls = std::bit_width(cap);
  // Make room by dropping the smallest cached buffers first: big buffers are
  // the ones whose first touch is expensive.
  while (cached_ + cap > max_cached_) {
    while (lowest_ < kClasses && free_[lowest_].empty()) ++lowest_;
    if (lowest_ >= kClasses || lowest_ > cls) return;  // everything cached is at least as useful
    std::vector<IoBuf>& v = free_[lowest_];
    size_t smallest = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i].capacity() < v[smallest].capacity()) smallest = i;
    if (lowest_ == cls && v[smallest].capacity() >= cap) return;
    cached_ -= v[smallest].capacity();
    if (smallest + 1 != v.size()) v[smallest] = std::move(v.back());
    v.pop_back();  // freed
  }
  cached_ += cap;
  free_[cls].push_back(std::move(buf));
  lowest_ = std::min(lowest_, cls);
}

}  // namespace pion::net
