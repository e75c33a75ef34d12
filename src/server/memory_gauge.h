// MemoryGauge: the server's memory figures for INFO memory, MEMORY STATS and
// /metrics. used_memory is the store's data budget (what maxmemory bounds: string
// keys and namespaces; 0 without --kvcache), so that used_memory <= maxmemory
// holds as for Redis; allocator_allocated is what the allocator has handed out
// (mallinfo2: arenas in use + mmapped blocks; buffers and bookkeeping too). Each
// has the largest value seen beside it. The server owns one (Server::memory(),
// CommandEnv::memory()).
//
// mallinfo2 walks every free chunk of every arena under its lock (about 100 ms
// on a heap of 40,000 churned 1 KiB values), so it never runs on a worker once
// the first figure is known: AllocatorMemory() returns the last figure and,
// when that is older than kAllocatorRefreshUs, has the background runner take
// a new one. Nothing walks the heap while nobody asks.
//
// Thread-safety: any thread; every figure is an atomic (no lock).
#pragma once

#include <atomic>
#include <cstdint>

#include "server/task_runner.h"
#include "store/store.h"

namespace pion::server {

class MemoryGauge {
 public:
  // `background` takes the allocator figures after the first one.
  explicit MemoryGauge(TaskRunner* background) : background_(background) {}
  MemoryGauge(const MemoryGauge&) = delete;
  MemoryGauge& operator=(const MemoryGauge&) = delete;

  // The store whose budget is used_memory (nullptr without --kvcache), set
  // once before any figure is read.
  void set_store(store::Store* s) { store_ = s; }

  // INFO used_memory (see the file comment); raises the peak. The server's
  // sampler also calls it once a second, so the peak stays current.
  uint64_t UsedMemory();
  uint64_t used_memory_peak() const { return mem_peak_.load(std::memory_order_relaxed); }
  // INFO allocator_allocated: the last mallinfo2 figure (see the file
  // comment), and the largest one seen.
  uint64_t AllocatorMemory();
  static constexpr uint64_t kAllocatorRefreshUs = 5'000'000;
  uint64_t allocator_peak() const { return alloc_peak_.load(std::memory_order_relaxed); }

 private:
  uint64_t MeasureAllocator();

  TaskRunner* const background_;
  store::Store* store_ = nullptr;
  std::atomic<uint64_t> mem_peak_{0};
  std::atomic<uint64_t> alloc_peak_{0};
  std::atomic<uint64_t> alloc_last_{0};        // the last mallinfo2 figure
  std::atomic<uint64_t> alloc_last_us_{0};     // MonotonicUs when it was taken
  std::atomic<bool> alloc_refreshing_{false};  // a refresh is queued or running
};

}  // namespace pion::server
