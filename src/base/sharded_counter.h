// Per-thread-slot counters for the hot path: a server-wide count
// that every command bumps (receipts, fetch counts) is split into one
// cache-line-padded cell per worker, so no cache line is written by every
// worker; a reader sums the cells (a read may miss an increment in flight).
//
// A thread's slot: 1 + its worker index once the worker set it on its own
// thread (SetThreadSlot, server/worker.cc), 0 for every other thread (the main
// thread, background tasks, tests, the Redis module's threads), which share
// that cell. A worker's own cell is bumped with a relaxed load and store (it is
// the cell's only writer: no locked read-modify-write, ~20 cycles saved per
// bump); the shared cell 0 with relaxed fetch_add, so it stays exact.
// A Reset racing with an owner's bump may be undone by it (CONFIG RESETSTAT
// while commands run; as CommandStats).
//
// Thread-safety: Add from any thread; Sum and Reset from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace pion {

// Worker indices are below this (config: workers <= 64); slot 0 is everyone else.
inline constexpr size_t kMaxThreadSlots = 65;
inline constexpr size_t kCacheLine = 64;

namespace internal {
inline thread_local size_t tls_thread_slot = 0;
}  // namespace internal

// The calling thread's slot (0 until SetThreadSlot).
inline size_t ThreadSlot() { return internal::tls_thread_slot; }
// Worker `index` (>= 0) calls this on its own thread: slot index + 1 (clamped).
inline void SetThreadSlot(int index) {
  size_t s = static_cast<size_t>(index) + 1;
  internal::tls_thread_slot = s < kMaxThreadSlots ? s : 0;
}

// Adds `n` to the calling thread's own cell `c` of a per-slot counter (cells
// indexed by ThreadSlot()): a plain load + store when the slot is a worker's
// (its only writer), a fetch_add in the shared slot 0.
inline void SlotAdd(std::atomic<uint64_t>& c, uint64_t n) {
  if (ThreadSlot() != 0)
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  else
    c.fetch_add(n, std::memory_order_relaxed);
}

class ShardedCounter {
 public:
  void Add(uint64_t n = 1) { SlotAdd(cells_[ThreadSlot()].v, n); }
  uint64_t Sum() const {
    uint64_t s = 0;
    for (const Cell& c : cells_) s += c.v.load(std::memory_order_relaxed);
    return s;
  }
  void Reset() {
    for (Cell& c : cells_) c.v.store(0, std::memory_order_relaxed);
  }

 private:
  struct alignas(kCacheLine) Cell {
    std::atomic<uint64_t> v{0};
  };
  Cell cells_[kMaxThreadSlots];
};

}  // namespace pion
