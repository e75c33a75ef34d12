// IoBuf and BufferPool: the large byte buffers of the network path (query
// buffers, big bulk arguments, BulkReserve replies). Every IoBuf is 64-byte
// aligned, so two buffers never sit 1-31 bytes apart modulo 4 KiB (glibc's
// memcpy falls to ~2.4 GB/s on Zen 3 for such pairs: 4K aliasing).
// A BufferPool keeps released buffers for reuse because first-touching fresh
// pages costs ~1 GB/s per core (measured on the development VM), far below the network, and
// so that the steady state of small commands allocates nothing: a connection
// returns its query buffer after every read batch and takes one again on the
// next. Buffers are kept in one stack per power-of-two size class
// (vectors that only grow, so Put and Get do no allocation once warm).
//
// Thread-safety: an IoBuf is a plain owned value. A BufferPool belongs to one
// worker thread and is not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/owned_buffer.h"

namespace pion::net {

inline constexpr size_t kIoBufAlign = 64;

class IoBuf {
 public:
  IoBuf() = default;
  // Capacity is `size` rounded up to 64 bytes (to 4 KiB from 64 KiB up).
  explicit IoBuf(size_t size);
  // The same, but an empty IoBuf when the memory cannot be had (no abort):
  // for sizes a client chose.
  static IoBuf TryAllocate(size_t size);
  // A block the process-wide BufferRecycler (base/owned_buffer.h) holds of at
  // least `size` bytes (pages already faulted in), or an empty IoBuf.
  static IoBuf TakeRecycled(size_t size);
  ~IoBuf();
  IoBuf(IoBuf&& o) noexcept : data_(o.data_), capacity_(o.capacity_) {
    o.data_ = nullptr;
    o.capacity_ = 0;
  }
  IoBuf& operator=(IoBuf&& o) noexcept;
  IoBuf(const IoBuf&) = delete;
  IoBuf& operator=(const IoBuf&) = delete;

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return data_ == nullptr; }
  // Hands the memory to a new owner (this IoBuf becomes empty); when that owner
  // drops it, it goes to the BufferRecycler (which frees it when full).
  OwnedBuffer IntoOwned() {
    OwnedBuffer o(data_, capacity_, &BufferRecycler::ReleaseToGlobal);
    data_ = nullptr;
    capacity_ = 0;
    return o;
  }

 private:
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

class BufferPool {
 public:
  // Buffers are cached only while the pool holds at most `max_cached_bytes`.
  explicit BufferPool(size_t max_cached_bytes) : max_cached_(max_cached_bytes) {}

  // A buffer of at least `size` bytes: a cached one no larger than 2 * size if
  // there is one, else a new one.
  IoBuf Get(size_t size);
  // The same, or an empty IoBuf when the memory cannot be had.
  IoBuf TryGet(size_t size);
  // A cached buffer of at least `size` bytes, or an empty IoBuf (never allocates).
  IoBuf TakeCached(size_t size);
  // Returns a buffer for reuse (or frees it when the cache is full).
  void Put(IoBuf buf);

  size_t cached_bytes() const { return cached_; }
  void set_max_cached_bytes(size_t n) { max_cached_ = n; }

 private:
  // free_[c]: cached buffers whose capacity has bit width c (2^(c-1) <= cap < 2^c).
  static constexpr size_t kClasses = 65;
  std::array<std::vector<IoBuf>, kClasses> free_;
  size_t lowest_ = kClasses;  // the lowest class that may be non-empty
  size_t cached_ = 0;
  size_t max_cached_;
};

}  // namespace pion::net
