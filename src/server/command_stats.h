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

// Latency tracking (INFO latencystats, LATENCY HISTOGRAM): a finer
// log-linear histogram in microseconds. Values up to 16 us have a bucket
// each; above, every (2^k, 2^(k+1)] is cut into 8 equal buckets (an error of
// at most 12.5%), up to 2^30 us (longer calls count in the last). Every power
// of two is a bucket's upper end, so LATENCY HISTOGRAM's cumulative
// "calls <= 2^i us" are exact.
inline constexpr size_t kTrackExact = 17;  // 0..16 us
inline constexpr size_t kTrackSub = 8;
inline constexpr size_t kTrackMaxLog2 = 30;
inline constexpr size_t kTrackBuckets = kTrackExact + (kTrackMaxLog2 - 4) * kTrackSub;
size_t TrackBucket(uint64_t us);
// The largest value (microseconds) counted in bucket i.
uint64_t TrackBucketHighUs(size_t i);
using TrackHist = std::array<uint64_t, kTrackBuckets>;
// The value at percentile p (0..100) as an HDR histogram reports it: the
// highest value of the bucket holding the ceil(p% of total)-th call (at least
// the first); 0 for an empty histogram.
uint64_t TrackPercentileUs(const TrackHist& h, double p);

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

  // Owner thread only. `track`: latency-tracking is on (one more store).
  void Record(size_t slot, uint64_t usec, bool failed, bool track) {
    Slot& s = slots_[slot];
    Bump(s.calls, 1);
    Bump(s.usec, usec);
    if (failed) Bump(s.failed, 1);
    Bump(s.hist[LatencyBucket(usec)], 1);
    if (track) Bump(s.track[TrackBucket(usec)], 1);
  }
  void Reject(size_t slot) { Bump(slots_[slot].rejected, 1); }
  void CountError(std::string_view code);

  // Any thread: adds this worker's counters into `out` (sized num_slots()).
  void AddTo(std::vector<CommandCounters>* out) const;
  void AddErrorsTo(std::map<std::string, uint64_t>* out) const;
  // Any thread: adds this worker's latency-tracking histograms into `out`
  // (sized num_slots()); returns false when it had none to add.
  bool AddTrackedTo(std::vector<TrackHist>* out) const;
  size_t num_slots() const { return slots_.size(); }
  // CONFIG RESETSTAT (any thread; a command counted concurrently may survive).
  void Reset();

 private:
  struct Slot {
    std::atomic<uint64_t> calls{0}, usec{0}, rejected{0}, failed{0};
    std::array<std::atomic<uint64_t>, kLatencyBuckets> hist{};
    std::array<std::atomic<uint64_t>, kTrackBuckets> track{};
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
