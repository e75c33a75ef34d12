// OwnedBuffer: a heap block handed from the layer that filled it to the layer
// that keeps it, with the function that gives it back. The network layer reads
// a big argument into a buffer of its own (net/big_arg_parser.h); a SET keeps
// that very buffer as the stored value (store/strings.h StrValue::Adopt)
// instead of copying it, and neither layer needs to know the other: the block
// travels as (data, capacity, release). BufferRecycler is where such blocks go
// when the last owner drops them, so that the next big argument reuses pages
// already faulted in (first touch costs ~1 GB/s per core on the
// development VM)
// instead of fresh ones from mmap.
//
// Thread-safety: an OwnedBuffer is a plain owned value (release may run on any
// thread). BufferRecycler is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace pion {

class OwnedBuffer {
 public:
  // Gives the block back (free it, or hand it to a recycler).
  using ReleaseFn = void (*)(void* data, size_t capacity);

  OwnedBuffer() = default;
  OwnedBuffer(void* data, size_t capacity, ReleaseFn release)
      : data_(data), capacity_(capacity), release_(release) {}
  ~OwnedBuffer() { reset(); }
  OwnedBuffer(OwnedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        capacity_(std::exchange(o.capacity_, 0)),
        release_(std::exchange(o.release_, nullptr)) {}
  OwnedBuffer& operator=(OwnedBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      capacity_ = std::exchange(o.capacity_, 0);
      release_ = std::exchange(o.release_, nullptr);
    }
    return *this;
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return data_ == nullptr; }
  void reset() {
    if (data_ != nullptr && release_ != nullptr) release_(data_, capacity_);
    data_ = nullptr;
    capacity_ = 0;
    release_ = nullptr;
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
  ReleaseFn release_ = nullptr;
};

// A bounded, process-wide cache of large 64-byte-aligned blocks from
// std::aligned_alloc (blocks of kMinBytes or more; smaller ones are freed).
// Put keeps a block while the cache holds at most max_bytes() (dropping the
// smallest cached blocks first), else frees it; Take returns a cached block of
// at least `size` bytes and at most 2 * size + 4 KiB, or {nullptr, 0}.
class BufferRecycler {
 public:
  static constexpr size_t kMinBytes = 64 * 1024;

  // The process's recycler (set_max_bytes from the config at start-up and on
  // CONFIG SET; 0 disables it).
  static BufferRecycler& Global();
  // The release function of blocks that should come back here.
  static void ReleaseToGlobal(void* data, size_t capacity) { Global().Put(data, capacity); }

  explicit BufferRecycler(size_t max_bytes = 0) : max_(max_bytes) {}
  ~BufferRecycler() { Clear(); }
  BufferRecycler(const BufferRecycler&) = delete;
  BufferRecycler& operator=(const BufferRecycler&) = delete;

  void Put(void* data, size_t capacity);
  // {data, capacity}, or {nullptr, 0} when nothing cached fits.
  std::pair<void*, size_t> Take(size_t size);
  void set_max_bytes(size_t n);
  size_t max_bytes() const;
  size_t cached_bytes() const;
  uint64_t hits() const;    // Takes answered from the cache
  uint64_t misses() const;  // Takes that found nothing
  void Clear();

 private:
  void TrimLocked(size_t limit);

  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // by capacity
  size_t cached_ = 0;
  size_t max_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace pion
