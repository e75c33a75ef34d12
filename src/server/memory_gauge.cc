#include "server/memory_gauge.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>

#include "base/atomic_raise.h"
#include "base/clock.h"

namespace pion::server {

uint64_t MemoryGauge::UsedMemory() {
  uint64_t used = store_ != nullptr ? store_->used_bytes() : 0;
  base::AtomicRaise(&mem_peak_, used, std::memory_order_relaxed);
  return used;
}

uint64_t MemoryGauge::AllocatorMemory() {
  const uint64_t last = alloc_last_.load(std::memory_order_acquire);
  if (last == 0) return MeasureAllocator();  // the first figure: the heap is small
  const uint64_t now = MonotonicUs();
  if (now - alloc_last_us_.load(std::memory_order_relaxed) >= kAllocatorRefreshUs &&
      !alloc_refreshing_.exchange(true, std::memory_order_acq_rel)) {
    if (!background_->Post([this] {
          MeasureAllocator();
          alloc_refreshing_.store(false, std::memory_order_release);
        }))
      alloc_refreshing_.store(false, std::memory_order_release);  // shutting down
  }
  return last;
}

uint64_t MemoryGauge::MeasureAllocator() {
  struct mallinfo2 mi = ::mallinfo2();
  uint64_t used = mi.uordblks + mi.hblkhd;
  if (used == 0) {
    // An allocator mallinfo2 does not see (the sanitizers'): the resident set instead.
    FILE* f = std::fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (f != nullptr) {
      if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
      std::fclose(f);
    }
    used = resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  }
  base::AtomicRaise(&alloc_peak_, used, std::memory_order_relaxed);
  alloc_last_us_.store(MonotonicUs(), std::memory_order_relaxed);
  alloc_last_.store(used, std::memory_order_release);
  return used;
}

}  // namespace pion::server
