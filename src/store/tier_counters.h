// The disk tier's bookkeeping that needs none of the store's locks: the
// counters INFO and /metrics show (TierCounters: relaxed atomics, any thread),
// and the back-pressure on its writes with the pause after a failed one
// (TierBacklog). The store's tier code (tiering.cc, tier_namespaces.cc,
// tier_adopt.cc) counts through them; Store::tier_stats reads them.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/mutex.h"
#include "store/store_types.h"

namespace pion::store {

class TierCounters {
 public:
  // A finished read of `bytes` that took `us` microseconds: counted, timed and
  // put in the latency histogram's first bucket i with us <= 2^i (the last
  // bucket takes the rest).
  void Read(uint64_t bytes, uint64_t us) {
    reads_.fetch_add(1, std::memory_order_relaxed);
    read_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    read_us_.fetch_add(us, std::memory_order_relaxed);
    latency_[LatencyBucket(us)].fetch_add(1, std::memory_order_relaxed);
  }
  static size_t LatencyBucket(uint64_t us) {
    size_t b = 0;
    while (b + 1 < kTierLatencyBuckets && (uint64_t{1} << b) < us) ++b;
    return b;
  }
  void Wrote(uint64_t bytes) {
    writes_.fetch_add(1, std::memory_order_relaxed);
    write_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void Promoted() { promotions_.fetch_add(1, std::memory_order_relaxed); }
  void Evicted(uint64_t n = 1) { evictions_.fetch_add(n, std::memory_order_relaxed); }
  void Failed() { errors_.fetch_add(1, std::memory_order_relaxed); }
  // A restart's adoption of the tier's file (tier_adopt.cc): string keys and
  // namespaces adopted, and references of either kind dropped.
  void AdoptedString() { adopted_.fetch_add(1, std::memory_order_relaxed); }
  void AdoptedNamespace() { ns_adopted_.fetch_add(1, std::memory_order_relaxed); }
  void AdoptDropped() { adopt_drops_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t adopted() const { return adopted_.load(std::memory_order_relaxed); }
  uint64_t ns_adopted() const { return ns_adopted_.load(std::memory_order_relaxed); }
  uint64_t adopt_drops() const { return adopt_drops_.load(std::memory_order_relaxed); }

  // The counters into `s` (reads, read_bytes, writes, write_bytes,
  // promotions, evictions, errors, read_us, read_latency).
  void Fill(TierStats* s) const {
    s->reads = reads_.load(std::memory_order_relaxed);
    s->read_bytes = read_bytes_.load(std::memory_order_relaxed);
    s->writes = writes_.load(std::memory_order_relaxed);
    s->write_bytes = write_bytes_.load(std::memory_order_relaxed);
    s->promotions = promotions_.load(std::memory_order_relaxed);
    s->evictions = evictions_.load(std::memory_order_relaxed);
    s->errors = errors_.load(std::memory_order_relaxed);
    s->read_us = read_us_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < kTierLatencyBuckets; ++i)
      s->read_latency[i] = latency_[i].load(std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> reads_{0}, read_bytes_{0}, writes_{0}, write_bytes_{0}, promotions_{0},
      evictions_{0}, errors_{0}, read_us_{0};
  std::atomic<uint64_t> adopted_{0}, adopt_drops_{0}, ns_adopted_{0};
  std::array<std::atomic<uint64_t>, kTierLatencyBuckets> latency_{};
};

// The bytes queued for the tier's I/O threads to write, bounded by
// tier-write-queue, and the pause after a failed write: for a second nothing
// moves, so a failing disk behaves as no tier instead of bouncing every value.
class TierBacklog {
 public:
  void SetLimit(uint64_t bytes) EXCLUDES(mu_) {
    base::MutexLock l(&mu_);
    limit_ = bytes < 1 ? 1 : bytes;
  }
  // Waits until `bytes` more fit the limit (one write always may, however
  // big), then counts them.
  void Add(uint64_t bytes) EXCLUDES(mu_) {
    base::MutexLock l(&mu_);
    while (queued_ != 0 && queued_ + bytes > limit_) cv_.Wait(mu_);
    queued_ += bytes;
  }
  // `bytes` are written or given up: uncounted, and a waiting writer woken.
  void Done(uint64_t bytes) EXCLUDES(mu_) {
    {
      base::MutexLock l(&mu_);
      queued_ -= bytes;
    }
    cv_.SignalAll();
  }
  uint64_t queued() const EXCLUDES(mu_) {
    base::MutexLock l(&mu_);
    return queued_;
  }

  // A write failed at `now_us` (monotonic): paused for a second from then.
  void PauseAfterFailure(uint64_t now_us) {
    paused_until_us_.store(now_us + 1'000'000, std::memory_order_relaxed);
  }
  bool Paused(uint64_t now_us) const {
    return now_us < paused_until_us_.load(std::memory_order_relaxed);
  }

 private:
  mutable base::Mutex mu_;
  base::CondVar cv_;
  uint64_t queued_ GUARDED_BY(mu_) = 0;
  uint64_t limit_ GUARDED_BY(mu_) = 256ull << 20;
  std::atomic<uint64_t> paused_until_us_{0};
};

}  // namespace pion::store
