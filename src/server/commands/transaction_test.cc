// MULTI / EXEC / DISCARD in process, under memory pressure as Redis 7.0: a
// command queued while the store is full is refused (-OOM, the transaction
// aborts at EXEC), EXEC of a transaction holding a write that may use memory
// is refused when memory ran short meanwhile (nothing runs), DISCARD and a
// read-only EXEC always pass.
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

constexpr std::string_view kOom = "OOM command not allowed when used memory > 'maxmemory'.";

class TransactionOom : public KvTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory-policy", "noeviction"}), "OK");
  }
};

TEST_F(TransactionOom, QueuedCommandIsRefusedAndExecAborts) {
  ASSERT_EQ(Run({"SET", "a", "1"}), "OK");
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  ASSERT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "x", "1"}).error(), kOom);
  EXPECT_EQ(Run({"GET", "a"}).error(), kOom);  // as Redis: nothing is queued
  EXPECT_EQ(Run({"EXEC"}).error(), "EXECABORT Transaction discarded because of previous errors.");
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "0"}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "x"}).is_integer(0));
  EXPECT_EQ(Run({"GET", "a"}), "1");
}

TEST_F(TransactionOom, DiscardNeverFails) {
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  ASSERT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "x", "1"}).error(), kOom);
  EXPECT_EQ(Run({"DISCARD"}), "OK");
  EXPECT_EQ(Run({"PING"}), "PONG");
}

TEST_F(TransactionOom, ExecOfAWriteRunsNothingWhenMemoryRanShortMeanwhile) {
  ASSERT_EQ(Run({"MULTI"}), "OK");
  ASSERT_EQ(Run({"SET", "x", "1"}), "QUEUED");
  ASSERT_EQ(Run({"GET", "x"}), "QUEUED");
  SwitchClient(1);
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  SwitchClient(0);
  EXPECT_EQ(Run({"EXEC"}).error(),
            "EXECABORT Transaction discarded because of: OOM command not allowed when used "
            "memory > 'maxmemory'.");
  // The transaction is over and nothing ran.
  EXPECT_EQ(Run({"EXEC"}).error(), "ERR EXEC without MULTI");
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "0"}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "x"}).is_integer(0));
}

TEST_F(TransactionOom, ExecOfReadsIsNotRefused) {
  ASSERT_EQ(Run({"SET", "x", "value"}), "OK");
  ASSERT_EQ(Run({"MULTI"}), "OK");
  ASSERT_EQ(Run({"GET", "x"}), "QUEUED");
  ASSERT_EQ(Run({"PING"}), "QUEUED");
  SwitchClient(1);
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  SwitchClient(0);
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 2u) << r.Debug();
  EXPECT_EQ(r[0], "value");
  EXPECT_EQ(r[1], "PONG");
}

TEST_F(TransactionOom, EvictionMakesRoomFirst) {
  // With an eviction policy the store evicts before it refuses: a budget with
  // room for a key once the others are gone lets the transaction through.
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}), "OK");
  for (int i = 0; i < 20; ++i) ASSERT_EQ(Run({"SET", "k" + std::to_string(i), "v"}), "OK");
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "1024"}), "OK");
  ASSERT_EQ(Run({"MULTI"}), "OK");
  ASSERT_EQ(Run({"SET", "x", "1"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 1u) << r.Debug();
  EXPECT_EQ(r[0], "OK");
  // Below one entry's overhead nothing fits, whatever the policy.
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  ASSERT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "x", "1"}).error(), kOom);
  EXPECT_EQ(Run({"DISCARD"}), "OK");
}

TEST_F(TransactionOom, RefusalsCountAsRejectedCalls) {
  ASSERT_EQ(Run({"CONFIG", "RESETSTAT"}), "OK");
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  ASSERT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "x", "1"}).error(), kOom);
  EXPECT_EQ(Run({"DISCARD"}), "OK");
  RespValue info = Run({"INFO", "commandstats"});
  EXPECT_NE(info.str.find("cmdstat_set:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,"
                          "failed_calls=0"),
            std::string::npos)
      << info.str;
}

}  // namespace
}  // namespace pion::server::testing
