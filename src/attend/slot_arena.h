// SlotArena: keeps the memory of freed slots for the next slot of a similar size
// (docs/attention.md "Slot memory").
//
// Why: touching fresh memory costs ~1 GB/s here (every 4 KiB page faults, and the guest
// hands freed pages back to the host, so memory freed to the OS faults again), which
// would cap KV.PREFIX.WARM at about half of its target. A slot's buffer is therefore
// handed back to the arena when the slot dies (its last reader released it: queries
// hold a reference, so nothing a query reads is ever reused), and the next slot whose
// size fits takes it as it is, already faulted in.
//
//  * Fit: a kept buffer of capacity c serves a request of b bytes when
//    b <= c <= b + b/8 (best fit: the smallest such c), so a slot never holds more than
//    1/8 above its size; Slot::bytes() counts the capacity.
//  * Bound: the arena keeps at most keep_limit() bytes of free buffers (SetKeepLimit,
//    set by the slot cache: attend-maxmemory minus the warm bytes, or the peak warm bytes
//    when attend-maxmemory is 0). A buffer handed back beyond it is freed, lowering the
//    limit frees the largest kept buffers first, and a fresh allocation first frees
//    kept buffers so that kept + the new buffer stays within the limit.
//  * Fresh buffers of at least kMapBytes come from mmap with MAP_POPULATE (one kernel
//    call faults the whole buffer in, ~25% faster here than faulting page by page);
//    smaller ones from aligned_alloc. Every buffer is 64-byte aligned.
//
// Thread-safety: every method may be called from any thread (one mutex; memory is
// mapped and unmapped outside it where it can be).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace pion::attend {

struct SlotArenaStats {
  uint64_t kept_bytes = 0;  // free buffers held for reuse
  uint64_t kept_buffers = 0;
  uint64_t reused = 0;  // lifetime allocations served from a kept buffer
  uint64_t fresh = 0;   // lifetime allocations of new memory
  uint64_t keep_limit = 0;
};

class SlotArena {
 public:
  static constexpr size_t kMapBytes = size_t{1} << 20;

  explicit SlotArena(uint64_t keep_limit = 0) : keep_limit_(keep_limit) {}
  ~SlotArena();  // frees the kept buffers (live slots hold their own)
  SlotArena(const SlotArena&) = delete;
  SlotArena& operator=(const SlotArena&) = delete;

  // A 64-byte-aligned buffer of at least `bytes` (> 0); `*capacity` receives its size,
  // which Release() must be given back. Null when out of memory.
  uint8_t* Allocate(size_t bytes, size_t* capacity);
  // Keeps `p` for reuse, or frees it when that would pass the keep limit.
  void Release(uint8_t* p, size_t capacity);

  void SetKeepLimit(uint64_t bytes);  // frees kept buffers beyond it
  uint64_t keep_limit() const;
  void Clear();  // frees every kept buffer
  SlotArenaStats Stats() const;

  // Without an arena: the same allocation (mmap / aligned_alloc) and its free.
  static uint8_t* AllocateFresh(size_t bytes, size_t* capacity);
  static void FreeBuffer(uint8_t* p, size_t capacity);

 private:
  using Kept = std::multimap<size_t, uint8_t*>;  // capacity -> buffer
  // Moves kept buffers (largest first) into `out` until kept_bytes_ <= limit. REQUIRES mu_.
  void TrimLocked(uint64_t limit, Kept* out);
  static void FreeAll(Kept* k);

  mutable std::mutex mu_;
  Kept kept_;
  uint64_t kept_bytes_ = 0;
  uint64_t keep_limit_;
  uint64_t reused_ = 0, fresh_ = 0;
};

}  // namespace pion::attend
