// StrValue (strings.h): a string key's value bytes and how they are held.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "base/check.h"
#include "store/strings.h"

namespace pion::store {

namespace {

std::atomic<uint64_t> g_adopted{0};  // StrValue::adopted_total()

// Values of at most this many bytes live in the same allocation as their
// shared_ptr control block and StrValue (one allocation per small SET instead
// of two); larger ones get their own buffer, which BufferRecycler may reuse
// and Adopt may hand over without copying.
constexpr size_t kInlineValueBytes = 4096;

// std::allocate_shared's allocator for that: the block it is asked for (the
// control block holding the StrValue), rounded up to 64 bytes, then `extra`
// bytes for the value, 64-byte aligned; *data gets their address.
template <class T>
struct InlineValueAlloc {
  using value_type = T;
  size_t extra;
  uint8_t** data;
  InlineValueAlloc(size_t e, uint8_t** d) : extra(e), data(d) {}
  template <class U>
  InlineValueAlloc(const InlineValueAlloc<U>& o) : extra(o.extra), data(o.data) {}
  static size_t Head(size_t n) { return (n * sizeof(T) + 63) & ~size_t{63}; }
  T* allocate(size_t n) {
    void* p = ::operator new (Head(n) + extra, std::align_val_t{64});
    *data = static_cast<uint8_t*>(p) + Head(n);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const InlineValueAlloc<U>& o) const {
    return extra == o.extra;
  }
};

}  // namespace

std::shared_ptr<StrValue> StrValue::TryMake(size_t n) {
  size_t cap = (n + 63) & ~size_t{63};
  if (cap < n) return nullptr;  // overflow
  if (cap == 0) cap = 64;
  if (cap <= kInlineValueBytes) {
    uint8_t* data = nullptr;
    auto v = std::allocate_shared<StrValue>(InlineValueAlloc<StrValue>(cap, &data));
    v->data = data;
    v->size = n;
    v->capacity = cap;
    return v;
  }
  void* p = nullptr;
  if (cap >= BufferRecycler::kMinBytes) {
    auto [data, got] = BufferRecycler::Global().Take(cap);
    p = data;
    if (p != nullptr) cap = got;
  }
  if (p == nullptr) p = std::aligned_alloc(64, cap);
  if (p == nullptr) return nullptr;
  return Wrap(OwnedBuffer(p, cap, &BufferRecycler::ReleaseToGlobal), n);
}

std::shared_ptr<StrValue> StrValue::Adopt(OwnedBuffer buf, size_t n) {
  g_adopted.fetch_add(1, std::memory_order_relaxed);
  return Wrap(std::move(buf), n);
}

uint64_t StrValue::adopted_total() { return g_adopted.load(std::memory_order_relaxed); }

std::shared_ptr<StrValue> StrValue::Wrap(OwnedBuffer buf, size_t n) {
  PION_DCHECK(n <= buf.capacity());
  auto v = std::make_shared<StrValue>();
  v->data = static_cast<uint8_t*>(buf.data());
  v->size = n;
  v->capacity = buf.capacity();
  v->mem = std::move(buf);
  return v;
}

std::shared_ptr<StrValue> StrValue::FromBuffer(OwnedBuffer buf, size_t offset, size_t n) {
  auto v = std::make_shared<StrValue>();
  v->data = static_cast<uint8_t*>(buf.data()) + offset;
  v->size = n;
  v->capacity = buf.capacity();
  v->mem = std::move(buf);
  return v;
}

std::shared_ptr<StrValue> StrValue::Copy(std::string_view s) {
  auto v = TryMake(s.size());
  if (v && !s.empty()) std::memcpy(v->data, s.data(), s.size());
  return v;
}

}  // namespace pion::store
