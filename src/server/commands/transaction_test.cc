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

// As Redis 7: the queued commands hold memory, shown in CLIENT LIST (multi=,
// multi-mem; the transport counts it into tot-mem, so client eviction sees it).
TEST_F(TransactionOom, QueuedCommandsShowInClientList) {
  auto line_of_txc = [this] {
    SwitchClient(1);
    std::string list = Run({"CLIENT", "LIST"}).str;
    SwitchClient(0);
    size_t at = list.find("name=txc ");
    if (at == std::string::npos) return std::string();
    size_t begin = list.rfind('\n', at);
    begin = begin == std::string::npos ? 0 : begin + 1;
    return list.substr(begin, list.find('\n', at) - begin);
  };
  ASSERT_EQ(Run({"CLIENT", "SETNAME", "txc"}), "OK");
  std::string line = line_of_txc();
  EXPECT_NE(line.find(" multi=-1 "), std::string::npos) << line;
  EXPECT_NE(line.find(" multi-mem=0 "), std::string::npos) << line;
  ASSERT_EQ(Run({"MULTI"}), "OK");
  EXPECT_NE(line_of_txc().find(" multi=0 "), std::string::npos);
  ASSERT_EQ(Run({"SET", "k", std::string(100000, 'v')}), "QUEUED");
  ASSERT_EQ(Run({"SET", "k", std::string(100000, 'v')}), "QUEUED");
  line = line_of_txc();
  EXPECT_NE(line.find(" multi=2 "), std::string::npos) << line;
  size_t at = line.find(" multi-mem=");
  ASSERT_NE(at, std::string::npos) << line;
  EXPECT_GE(std::stoull(line.substr(at + 11)), 200000u) << line;
  ASSERT_EQ(Run({"DISCARD"}), "OK");
  line = line_of_txc();
  EXPECT_NE(line.find(" multi=-1 "), std::string::npos) << line;
  EXPECT_NE(line.find(" multi-mem=0 "), std::string::npos) << line;
}

}  // namespace
}  // namespace pion::server::testing
