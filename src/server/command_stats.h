// CommandStats: one worker's per-command counters (INFO commandstats, the
// Prometheus command latency histograms) and per-error-code counts (INFO
// errorstats). Each worker owns one and is its only writer: counters are
// relaxed atomics bumped with a plain load + store (no read-modify-write, no
// cache line shared with another worker), so counting costs a command two
// clock reads and a few stores. Readers (INFO, /metrics) on any thread sum
// every worker's copy; a read may miss the command in flight.
//
// Error codes are rarer: a small map under a per-worker mutex, at most
// kMaxErrorCodes distinct codes (as Redis, later new codes are not tracked
// separately but still counted in total_error_replies).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace pion::server {

// Latency histogram buckets: upper bounds 1, 2, 4, ... 2^(kLatencyBuckets-2)
// microseconds, then +Inf.
inline constexpr size_t kLatencyBuckets = 26;
inline uint64_t LatencyBucketBoundUs(size_t i) { return uint64_t{1} << i; }
size_t LatencyBucket(uint64_t us);

struct CommandCounters {
  uint64_t calls = 0;
  uint64_t usec = 0;
  uint64_t rejected = 0;
  uint64_t failed = 0;
  std::array<uint64_t, kLatencyBuckets> hist{};  // not cumulative
  void Add(const CommandCounters& o);
};

class CommandStats {
 public:
  static constexpr size_t kMaxErrorCodes = 128;

  explicit CommandStats(size_t slots);

  // Owner thread only.
  void Record(size_t slot, uint64_t usec, bool failed) {
    Slot& s = slots_[slot];
    Bump(s.calls, 1);
    Bump(s.usec, usec);
    if (failed) Bump(s.failed, 1);
    Bump(s.hist[LatencyBucket(usec)], 1);
  }
  void Reject(size_t slot) { Bump(slots_[slot].rejected, 1); }
  void CountError(std::string_view code);

  // Any thread: adds this worker's counters into `out` (sized num_slots()).
  void AddTo(std::vector<CommandCounters>* out) const;
  void AddErrorsTo(std::map<std::string, uint64_t>* out) const;
  size_t num_slots() const { return slots_.size(); }
  // CONFIG RESETSTAT (any thread; a command counted concurrently may survive).
  void Reset();

 private:
  struct Slot {
    std::atomic<uint64_t> calls{0}, usec{0}, rejected{0}, failed{0};
    std::array<std::atomic<uint64_t>, kLatencyBuckets> hist{};
  };
  static void Bump(std::atomic<uint64_t>& a, uint64_t n) {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  std::unique_ptr<Slot[]> slots_storage_;
  std::span<Slot> slots_;
  mutable base::Mutex errors_mu_;
  std::map<std::string, uint64_t, std::less<>> errors_ GUARDED_BY(errors_mu_);
};

}  // namespace pion::server
