// maxmemory-policy's LFU, TTL and volatile-random policies (Redis's names and
// choices) and OBJECT FREQ, through the commands.
#include <string>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class EvictionPolicyTest : public KvTest {
 protected:
  // A budget of about `keys` small string keys (each is charged its name, its
  // value rounded up to 64 bytes and 96 bytes of bookkeeping).
  void Budget(int keys, const char* policy) {
    ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory-samples", "64"}), "OK");
    ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory-policy", policy}), "OK");
    ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", std::to_string(keys * 170)}), "OK");
  }
  bool Exists(const std::string& k) { return Run({"EXISTS", k}).is_integer(1); }
};

TEST_F(EvictionPolicyTest, EveryRedisPolicyNameIsAccepted) {
  for (const char* p : {"allkeys-lru", "noeviction", "volatile-lru", "allkeys-random",
                        "allkeys-lfu", "volatile-lfu", "volatile-random", "volatile-ttl"}) {
    SCOPED_TRACE(p);
    ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory-policy", p}), "OK");
    EXPECT_EQ(Run({"CONFIG", "GET", "maxmemory-policy"})[1], p);
  }
  EXPECT_TRUE(Run({"CONFIG", "SET", "maxmemory-policy", "lfu"}).is_error());
}

TEST_F(EvictionPolicyTest, VolatilePoliciesEvictOnlyKeysWithATtl) {
  for (const char* policy : {"volatile-ttl", "volatile-random", "volatile-lfu"}) {
    SCOPED_TRACE(policy);
    ASSERT_EQ(Run({"FLUSHALL"}), "OK");
    ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "0"}), "OK");
    for (int i = 0; i < 5; ++i) ASSERT_EQ(Run({"SET", "p" + std::to_string(i), "x"}), "OK");
    for (int i = 0; i < 5; ++i)
      ASSERT_EQ(Run({"SETEX", "v" + std::to_string(i), "10000", "x"}), "OK");
    Budget(10, policy);
    // Five more keys with a TTL: room is made from the volatile keys only.
    for (int i = 0; i < 5; ++i)
      ASSERT_EQ(Run({"SETEX", "w" + std::to_string(i), "10000", "x"}), "OK");
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(Exists("p" + std::to_string(i)));
    // With nothing volatile left to evict, a write is refused.
    ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "0"}), "OK");
    ASSERT_EQ(Run({"FLUSHALL"}), "OK");
    for (int i = 0; i < 10; ++i) ASSERT_EQ(Run({"SET", "p" + std::to_string(i), "x"}), "OK");
    Budget(10, policy);
    EXPECT_EQ(Run({"SET", "extra", "x"}).error(),
              "OOM command not allowed when used memory > 'maxmemory'.");
  }
}

TEST_F(EvictionPolicyTest, VolatileTtlEvictsTheNearestExpiryFirst) {
  // Few keys and 64 samples: every key is sampled, the choice is exact.
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(Run({"SETEX", "k" + std::to_string(i), std::to_string(1000 * (i + 1)), "x"}), "OK");
  Budget(8, "volatile-ttl");
  ASSERT_EQ(Run({"SETEX", "late", "999999", "x"}), "OK");
  EXPECT_FALSE(Exists("k0"));  // the soonest to expire went
  for (int i = 2; i < 8; ++i) EXPECT_TRUE(Exists("k" + std::to_string(i)));
  EXPECT_TRUE(Exists("late"));
}

TEST_F(EvictionPolicyTest, AllkeysLfuKeepsTheFrequentlyUsedKeys) {
  // lfu-log-factor 0: every access counts (the counter is exact).
  ASSERT_EQ(Run({"CONFIG", "SET", "lfu-log-factor", "0"}), "OK");
  for (int i = 0; i < 8; ++i) ASSERT_EQ(Run({"SET", "k" + std::to_string(i), "x"}), "OK");
  for (int n = 0; n < 20; ++n)
    for (int i = 1; i < 8; ++i) ASSERT_EQ(Run({"GET", "k" + std::to_string(i)}), "x");
  Budget(8, "allkeys-lfu");
  // A new key starts at 5 and one access lifts it to 6: k0 (5) is the coldest.
  ASSERT_EQ(Run({"SET", "new", "x"}), "OK");
  EXPECT_FALSE(Exists("k0"));
  for (int i = 1; i < 8; ++i) EXPECT_TRUE(Exists("k" + std::to_string(i)));
}

TEST_F(EvictionPolicyTest, ObjectFreqUnderAnLfuPolicyOnly) {
  ASSERT_EQ(Run({"SET", "foo", "bar"}), "OK");
  EXPECT_EQ(Run({"OBJECT", "FREQ", "foo"}).error().substr(0, 36),
            "ERR An LFU maxmemory policy is not s");
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory-policy", "volatile-lfu"}), "OK");
  ASSERT_EQ(Run({"CONFIG", "SET", "lfu-log-factor", "0"}), "OK");
  RespValue f0 = Run({"OBJECT", "FREQ", "foo"});
  ASSERT_EQ(f0.type, RespValue::Type::kInteger) << f0.Debug();
  ASSERT_EQ(Run({"GET", "foo"}), "bar");
  ASSERT_EQ(Run({"GET", "foo"}), "bar");
  EXPECT_TRUE(Run({"OBJECT", "FREQ", "foo"}).is_integer(f0.integer + 2));
  EXPECT_TRUE(Run({"OBJECT", "FREQ", "nosuch"}).type == RespValue::Type::kNull);
}

TEST_F(EvictionPolicyTest, AWriteOverTheBudgetIsRefusedEvenWhenItDoesNotGrow) {
  // As Redis: with used memory over maxmemory (lowered under noeviction), a
  // write that would not grow it (an overwrite of the same size) is refused
  // too, before it runs (a rejected call).
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory-policy", "noeviction"}), "OK");
  ASSERT_EQ(Run({"SET", "a", "b"}), "OK");
  ASSERT_EQ(Run({"SET", "k1", "v1"}), "OK");
  ASSERT_EQ(Run({"CONFIG", "RESETSTAT"}), "OK");
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  EXPECT_EQ(Run({"SET", "a", "b"}).error(),
            "OOM command not allowed when used memory > 'maxmemory'.");
  RespValue info = Run({"INFO", "commandstats"});
  EXPECT_NE(info.str.find("cmdstat_set:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,"
                          "failed_calls=0"),
            std::string::npos)
      << info.str;
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "0"}), "OK");
  EXPECT_EQ(Run({"SET", "a", "b"}), "OK");
}

}  // namespace
}  // namespace pion::server::testing
