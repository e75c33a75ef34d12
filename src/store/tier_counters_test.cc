#include "store/tier_counters.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace pion::store {
namespace {

// A read lands in the first bucket i with us <= 2^i; the last takes the rest.
TEST(TierCounters, ReadsFillTheLatencyHistogram) {
  EXPECT_EQ(TierCounters::LatencyBucket(0), 0u);
  EXPECT_EQ(TierCounters::LatencyBucket(1), 0u);
  EXPECT_EQ(TierCounters::LatencyBucket(2), 1u);
  EXPECT_EQ(TierCounters::LatencyBucket(3), 2u);
  EXPECT_EQ(TierCounters::LatencyBucket(1024), 10u);
  EXPECT_EQ(TierCounters::LatencyBucket(1025), 11u);
  EXPECT_EQ(TierCounters::LatencyBucket(~uint64_t{0}), kTierLatencyBuckets - 1);
  TierCounters c;
  c.Read(4096, 3);
  c.Read(65536, 1000);
  c.Wrote(8192);
  c.Promoted();
  c.Evicted(3);
  c.Failed();
  c.AdoptedString();
  c.AdoptDropped();
  TierStats s;
  c.Fill(&s);
  EXPECT_EQ(s.reads, 2u);
  EXPECT_EQ(s.read_bytes, 4096u + 65536u);
  EXPECT_EQ(s.read_us, 1003u);
  EXPECT_EQ(s.read_latency[2], 1u);
  EXPECT_EQ(s.read_latency[10], 1u);
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.write_bytes, 8192u);
  EXPECT_EQ(s.promotions, 1u);
  EXPECT_EQ(s.evictions, 3u);
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(c.adopted(), 1u);
  EXPECT_EQ(c.ns_adopted(), 0u);
  EXPECT_EQ(c.adopt_drops(), 1u);
}

// One write always may queue, however big; a second that would pass the
// limit waits until the first is done.
TEST(TierBacklog, AWriteBeyondTheLimitWaitsForTheQueueToDrain) {
  TierBacklog b;
  b.SetLimit(100);
  b.Add(500);  // alone: admitted
  EXPECT_EQ(b.queued(), 500u);
  std::atomic<bool> admitted{false};
  std::thread t([&] {
    b.Add(10);
    admitted = true;
  });
  b.Done(500);  // wakes the waiter (or lets it in at once)
  t.join();
  EXPECT_TRUE(admitted);
  EXPECT_EQ(b.queued(), 10u);
  b.Done(10);
  EXPECT_EQ(b.queued(), 0u);
}

TEST(TierBacklog, AFailurePausesMovesForASecond) {
  TierBacklog b;
  EXPECT_FALSE(b.Paused(5'000'000));
  b.PauseAfterFailure(5'000'000);
  EXPECT_TRUE(b.Paused(5'000'000));
  EXPECT_TRUE(b.Paused(5'999'999));
  EXPECT_FALSE(b.Paused(6'000'000));
}

}  // namespace
}  // namespace pion::store
