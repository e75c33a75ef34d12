#include "store/keyspace.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace pion::store {
namespace {

// The keys of a shard's RAM LRU list, least recent first.
std::vector<std::string> LruOrder(Keyspace& ks, std::string_view any_key) {
  Shard& sh = ks.ShardFor(any_key);
  base::MutexLock sl(&sh.mu);
  std::vector<std::string> out;
  for (const StrEntry* e = sh.lru_head; e != nullptr; e = e->next) out.push_back(*e->key);
  return out;
}

StrEntry& Insert(Keyspace& ks, std::string_view key) NO_THREAD_SAFETY_ANALYSIS {
  Shard& sh = ks.ShardFor(key);
  base::MutexLock sl(&sh.mu);
  return ks.InsertStringLocked(sh, key);
}

void Erase(Keyspace& ks, StrEntry& e) NO_THREAD_SAFETY_ANALYSIS {
  Shard& sh = ks.ShardFor(*e.key);
  base::MutexLock sl(&sh.mu);
  ks.EraseStringLocked(sh, e);
}

// A hash tag keeps keys in one shard, and the shard of a known hash is the
// shard of the key.
TEST(Keyspace, HashTagsKeepKeysInOneShard) {
  for (int i = 0; i < 200; ++i) {
    const std::string k = "key:" + std::to_string(i);
    EXPECT_EQ(Keyspace::ShardIndex(k), Keyspace::ShardIndex(k, Keyspace::LookupHash(k)));
    EXPECT_LT(Keyspace::ShardIndex(k), kShards);
    const std::string tag = "{u" + std::to_string(i) + "}";
    EXPECT_EQ(Keyspace::ShardIndex(tag + "a"), Keyspace::ShardIndex(tag + "b_pk"));
    EXPECT_EQ(Keyspace::ShardIndex(tag + "a"), Keyspace::ShardIndex(tag + "a", 0));
  }
}

// A key enters the map, the flat index, the scan order and its shard's LRU
// list at once, and leaves all of them at once, counting a removal.
TEST(Keyspace, InsertAndEraseKeepEveryOrderInStep) {
  Keyspace ks;
  base::MutexLock l(&ks.mu);
  StrEntry& a = Insert(ks, "{s}a");
  StrEntry& b = Insert(ks, "{s}b");
  EXPECT_EQ(ks.FindStringLocked("{s}a"), &a);
  EXPECT_EQ(*a.key, "{s}a");
  EXPECT_EQ(a.hash, Keyspace::LookupHash("{s}a"));
  EXPECT_EQ(ks.scan_order().size(), 2u);
  EXPECT_EQ(ks.IndexOf(ks.ShardFor("{s}a")).size(), 2u);
  EXPECT_EQ(LruOrder(ks, "{s}a"), (std::vector<std::string>{"{s}a", "{s}b"}));
  const uint64_t missing = ks.MissingVersionLocked();
  EXPECT_NE(ks.NextVersionLocked(), missing);

  ks.SetExpireLocked(b, 5000);
  Erase(ks, b);
  EXPECT_EQ(ks.FindStringLocked("{s}b"), nullptr);
  EXPECT_EQ(ks.scan_order().size(), 1u);
  EXPECT_TRUE(ks.expiry_order().empty());
  EXPECT_EQ(ks.IndexOf(ks.ShardFor("{s}a")).size(), 1u);
  EXPECT_EQ(LruOrder(ks, "{s}a"), (std::vector<std::string>{"{s}a"}));
  EXPECT_NE(ks.MissingVersionLocked(), missing);  // a removal changes a missing key's version

  Insert(ks, "x");
  ks.ClearStringsLocked();
  EXPECT_EQ(ks.FindStringLocked("{s}a"), nullptr);
  EXPECT_EQ(ks.FindStringLocked("x"), nullptr);
  EXPECT_TRUE(ks.scan_order().empty());
  EXPECT_TRUE(LruOrder(ks, "{s}a").empty());
  EXPECT_EQ(ks.ChangesLocked(), 1u + 3u);  // one version, three removals
}

// The expiry order holds each key once, at its latest time, and its mean.
TEST(Keyspace, ExpiryOrderFollowsEveryChange) {
  Keyspace ks;
  base::MutexLock l(&ks.mu);
  StrEntry& a = Insert(ks, "a");
  StrEntry& b = Insert(ks, "b");
  EXPECT_EQ(ks.MeanExpireMsLocked(), 0);
  ks.SetExpireLocked(a, 1000);
  ks.SetExpireShardLocked(b, 3000);
  EXPECT_EQ(ks.MeanExpireMsLocked(), 2000);
  ks.SetExpireLocked(a, 4000);
  ASSERT_EQ(ks.expiry_order().size(), 2u);
  EXPECT_EQ(ks.expiry_order().begin()->second, &b);
  EXPECT_EQ(ks.MeanExpireMsLocked(), 3500);
  ks.SetExpireLocked(b, 0);
  ASSERT_EQ(ks.expiry_order().size(), 1u);
  EXPECT_EQ(ks.expiry_order().begin()->first, 4000);
  EXPECT_EQ(b.expire_at_ms, 0);
}

// Touches stamp in order and move a key to the most recent end of its list;
// a restored stamp keeps the clock above it.
TEST(Keyspace, TouchesStampInOrderAndRenewTheLru) {
  Keyspace ks;
  base::MutexLock l(&ks.mu);
  StrEntry& a = Insert(ks, "{t}a");
  StrEntry& b = Insert(ks, "{t}b");
  Shard& sh = ks.ShardFor("{t}a");
  {
    base::MutexLock sl(&sh.mu);
    ks.TouchLocked(sh, a);
  }
  EXPECT_EQ(LruOrder(ks, "{t}a"), (std::vector<std::string>{"{t}b", "{t}a"}));
  {
    base::MutexLock sl(&sh.mu);
    ks.TouchLocked(sh, b);
  }
  EXPECT_LT(a.stamp, b.stamp);
  ks.RaiseClockAbove(1000);
  EXPECT_GT(ks.NextStamp(), 1000u);
  ks.RaiseClockAbove(10);  // never lowers it
  EXPECT_GT(ks.NextStamp(), 1000u);
}

// Sampling's table of buckets: every shard's string map one after the other;
// walking it from any place with Next visits each bucket once, wrapping.
TEST(Keyspace, BucketWalkVisitsEveryBucketOnce) {
  Keyspace ks;
  base::MutexLock l(&ks.mu);
  for (int i = 0; i < 300; ++i) Insert(ks, "k" + std::to_string(i));
  const size_t nb = ks.StringBucketsLocked();
  size_t want = 0;
  for (size_t i = 0; i < kShards; ++i) want += ks.StringsOf(ks.shard(i)).bucket_count();
  ASSERT_EQ(nb, want);
  for (size_t start : {size_t{0}, nb / 3, nb - 1}) {
    Keyspace::BucketPos p = ks.StringBucketLocked(start);
    std::set<std::pair<size_t, size_t>> seen;
    size_t keys = 0;
    for (size_t k = 0; k < nb; ++k, ks.NextStringBucketLocked(&p)) {
      ASSERT_LT(p.shard, kShards);
      ASSERT_LT(p.bucket, ks.StringsOf(ks.shard(p.shard)).bucket_count());
      seen.insert({p.shard, p.bucket});
      keys += ks.StringsOf(ks.shard(p.shard)).bucket_size(p.bucket);
    }
    EXPECT_EQ(seen.size(), nb);
    EXPECT_EQ(keys, 300u);
    EXPECT_EQ(p.shard, ks.StringBucketLocked(start).shard);  // wrapped to the start
    EXPECT_EQ(p.bucket, ks.StringBucketLocked(start).bucket);
  }
}

// Redis's LFU: a new key starts at 5; with a log factor of 0 every access
// counts; with a decay time of 0 the counter never decays.
TEST(Keyspace, LfuCounterStartsAtFiveAndCounts) {
  Keyspace ks;
  StrEntry e;
  Keyspace::LfuInit(e);
  EXPECT_EQ(ks.LfuDecayed(e), kLfuInitCounter);
  ks.SetLfuParams(0, 0);
  for (int i = 0; i < 10; ++i) ks.LfuTouch(e);
  EXPECT_EQ(ks.LfuDecayed(e), kLfuInitCounter + 10);
  for (int i = 0; i < 300; ++i) ks.LfuTouch(e);
  EXPECT_EQ(ks.LfuDecayed(e), 255);  // saturates
}

}  // namespace
}  // namespace pion::store
