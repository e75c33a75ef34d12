// MULTI / EXEC / DISCARD / WATCH / UNWATCH in process, with Redis 7.0's
// replies (checked against redis-server 7.0.15): the queued replies as one
// array, the errors of misplaced commands, EXECABORT after a command refused
// while queueing, runtime errors as elements of EXEC's array, and WATCH
// making EXEC answer a null array after another client's (or our own) write.
// Then under memory pressure, as Redis 7.0: a command queued while the store
// is full is refused (-OOM, the transaction aborts at EXEC), EXEC of a
// transaction holding a write that may use memory is refused when memory ran
// short meanwhile (nothing runs), DISCARD and a read-only EXEC always pass.
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

constexpr std::string_view kExecAbort =
    "EXECABORT Transaction discarded because of previous errors.";

bool IsNullArray(const RespValue& v) { return v.type == RespValue::Type::kNull; }

class Transaction : public KvTest {};

TEST_F(Transaction, ExecReturnsTheQueuedRepliesInOrder) {
  EXPECT_EQ(Run({"MULTI"}), "OK");
  RespValue queued = Run({"SET", "k", "1"});
  EXPECT_EQ(queued.type, RespValue::Type::kSimple);
  EXPECT_EQ(queued, "QUEUED");
  EXPECT_EQ(Run({"INCR", "k"}), "QUEUED");
  EXPECT_EQ(Run({"GET", "k"}), "QUEUED");
  EXPECT_EQ(Run({"PING"}), "QUEUED");
  // Nothing ran yet: another client sees no key.
  SwitchClient(1);
  EXPECT_TRUE(Run({"EXISTS", "k"}).is_integer(0));
  SwitchClient(0);
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.type, RespValue::Type::kArray) << r.Debug();
  ASSERT_EQ(r.size(), 4u) << r.Debug();
  EXPECT_EQ(r[0], "OK");
  EXPECT_TRUE(r[1].is_integer(2));
  EXPECT_EQ(r[2].type, RespValue::Type::kBulk);
  EXPECT_EQ(r[2], "2");
  EXPECT_EQ(r[3], "PONG");
  EXPECT_EQ(Run({"GET", "k"}), "2");
  // The transaction is over.
  EXPECT_EQ(Run({"EXEC"}).error(), "ERR EXEC without MULTI");
}

TEST_F(Transaction, EmptyExecIsAnEmptyArray) {
  EXPECT_EQ(Run({"MULTI"}), "OK");
  RespValue r = Run({"EXEC"});
  EXPECT_EQ(r.type, RespValue::Type::kArray) << r.Debug();
  EXPECT_EQ(r.size(), 0u);
}

TEST_F(Transaction, DiscardDropsTheQueue) {
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "y", "1"}), "QUEUED");
  EXPECT_EQ(Run({"DISCARD"}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "y"}).is_integer(0));
  EXPECT_EQ(Run({"EXEC"}).error(), "ERR EXEC without MULTI");
  // DISCARD also clears a transaction an error had marked.
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "m1", "1"}), "QUEUED");
  EXPECT_EQ(Run({"SET", "m2"}).error(), "ERR wrong number of arguments for 'set' command");
  EXPECT_EQ(Run({"DISCARD"}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "m1"}).is_integer(0));
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "m1", "1"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 1u) << r.Debug();
  EXPECT_EQ(r[0], "OK");
}

TEST_F(Transaction, ExecAndDiscardWithoutMulti) {
  EXPECT_EQ(Run({"EXEC"}).error(), "ERR EXEC without MULTI");
  EXPECT_EQ(Run({"DISCARD"}).error(), "ERR DISCARD without MULTI");
}

TEST_F(Transaction, NestedMultiIsAnErrorThatDoesNotAbort) {
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"MULTI"}).error(), "ERR MULTI calls can not be nested");
  EXPECT_EQ(Run({"SET", "x", "1"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 1u) << r.Debug();
  EXPECT_EQ(r[0], "OK");
  EXPECT_EQ(Run({"GET", "x"}), "1");
}

TEST_F(Transaction, WrongArityWhileQueueingAbortsExec) {
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "y"}).error(), "ERR wrong number of arguments for 'set' command");
  EXPECT_EQ(Run({"SET", "z", "1"}), "QUEUED");  // still queued after the error
  EXPECT_EQ(Run({"EXEC"}).error(), kExecAbort);
  EXPECT_TRUE(Run({"EXISTS", "z"}).is_integer(0));  // nothing ran
  EXPECT_EQ(Run({"EXEC"}).error(), "ERR EXEC without MULTI");
}

TEST_F(Transaction, UnknownCommandWhileQueueingAbortsExec) {
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "z", "1"}), "QUEUED");
  EXPECT_EQ(Run({"NOSUCHCMD"}).error(),
            "ERR unknown command 'NOSUCHCMD', with args beginning with: ");
  EXPECT_EQ(Run({"EXEC"}).error(), kExecAbort);
  EXPECT_TRUE(Run({"EXISTS", "z"}).is_integer(0));
}

TEST_F(Transaction, RuntimeErrorIsOneElementAndTheRestRuns) {
  ASSERT_EQ(Run({"SET", "s", "abc"}), "OK");
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "t", "1"}), "QUEUED");
  EXPECT_EQ(Run({"INCR", "s"}), "QUEUED");  // checked only when it runs
  EXPECT_EQ(Run({"INCR", "t"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.type, RespValue::Type::kArray) << r.Debug();
  ASSERT_EQ(r.size(), 3u) << r.Debug();
  EXPECT_EQ(r[0], "OK");
  EXPECT_EQ(r[1].error(), "ERR value is not an integer or out of range");
  EXPECT_TRUE(r[2].is_integer(2));
  // No rollback.
  EXPECT_EQ(Run({"GET", "t"}), "2");
  EXPECT_EQ(Run({"GET", "s"}), "abc");
}

TEST_F(Transaction, WatchedKeyWrittenByAnotherClientMakesExecNil) {
  ASSERT_EQ(Run({"SET", "k", "1"}), "OK");
  EXPECT_EQ(Run({"WATCH", "k"}), "OK");
  SwitchClient(1);
  ASSERT_EQ(Run({"SET", "k", "other"}), "OK");
  SwitchClient(0);
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "k", "mine"}), "QUEUED");
  EXPECT_TRUE(IsNullArray(Run({"EXEC"})));
  EXPECT_EQ(last_wire(), "*-1\r\n");  // a null array, as Redis's RESP2 reply
  EXPECT_EQ(Run({"GET", "k"}), "other");
  // EXEC forgot the watched keys: the next transaction runs.
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "k", "mine"}), "QUEUED");
  EXPECT_EQ(Run({"EXEC"}).size(), 1u);
  EXPECT_EQ(Run({"GET", "k"}), "mine");
}

TEST_F(Transaction, WatchedKeyDeletedOrExpireSetMakesExecNil) {
  ASSERT_EQ(Run({"SET", "k", "1"}), "OK");
  EXPECT_EQ(Run({"WATCH", "k"}), "OK");
  SwitchClient(1);
  ASSERT_TRUE(Run({"DEL", "k"}).is_integer(1));
  SwitchClient(0);
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"PING"}), "QUEUED");
  EXPECT_TRUE(IsNullArray(Run({"EXEC"})));

  ASSERT_EQ(Run({"SET", "e", "v"}), "OK");
  EXPECT_EQ(Run({"WATCH", "e"}), "OK");
  SwitchClient(1);
  ASSERT_TRUE(Run({"EXPIRE", "e", "100"}).is_integer(1));
  SwitchClient(0);
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"PING"}), "QUEUED");
  EXPECT_TRUE(IsNullArray(Run({"EXEC"})));
}

TEST_F(Transaction, WatchedKeyCreatedByAnotherClientMakesExecNil) {
  EXPECT_EQ(Run({"WATCH", "nokey"}), "OK");
  SwitchClient(1);
  ASSERT_EQ(Run({"SET", "nokey", "v"}), "OK");
  SwitchClient(0);
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"PING"}), "QUEUED");
  EXPECT_TRUE(IsNullArray(Run({"EXEC"})));
}

TEST_F(Transaction, OwnWriteToAWatchedKeyMakesExecNil) {
  ASSERT_EQ(Run({"SET", "wk", "v"}), "OK");
  EXPECT_EQ(Run({"WATCH", "wk"}), "OK");
  ASSERT_EQ(Run({"SET", "wk", "self"}), "OK");
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"PING"}), "QUEUED");
  EXPECT_TRUE(IsNullArray(Run({"EXEC"})));
}

TEST_F(Transaction, ReadsOfAWatchedKeyDoNotAbort) {
  ASSERT_EQ(Run({"SET", "wk", "v"}), "OK");
  EXPECT_EQ(Run({"WATCH", "wk"}), "OK");
  SwitchClient(1);
  EXPECT_EQ(Run({"GET", "wk"}), "v");
  SwitchClient(0);
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"GET", "wk"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 1u) << r.Debug();
  EXPECT_EQ(r[0], "v");
}

TEST_F(Transaction, UnwatchLetsExecRun) {
  ASSERT_EQ(Run({"SET", "k", "1"}), "OK");
  EXPECT_EQ(Run({"WATCH", "k"}), "OK");
  SwitchClient(1);
  ASSERT_EQ(Run({"SET", "k", "other"}), "OK");
  SwitchClient(0);
  EXPECT_EQ(Run({"UNWATCH"}), "OK");
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"SET", "k", "mine"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 1u) << r.Debug();
  EXPECT_EQ(r[0], "OK");
  EXPECT_EQ(Run({"GET", "k"}), "mine");
  // UNWATCH with nothing watched is OK too.
  EXPECT_EQ(Run({"UNWATCH"}), "OK");
}

TEST_F(Transaction, DiscardForgetsTheWatchedKeys) {
  ASSERT_EQ(Run({"SET", "k", "1"}), "OK");
  EXPECT_EQ(Run({"WATCH", "k"}), "OK");
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"DISCARD"}), "OK");
  SwitchClient(1);
  ASSERT_EQ(Run({"SET", "k", "x"}), "OK");
  SwitchClient(0);
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"PING"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 1u) << r.Debug();
  EXPECT_EQ(r[0], "PONG");
}

// As Redis 7.0: UNWATCH inside MULTI is queued like any command (+QUEUED; +OK
// in EXEC's array), and the keys watched before MULTI still decide EXEC: a
// write to one by another client after MULTI makes EXEC answer *-1.
TEST_F(Transaction, UnwatchInsideMultiIsQueuedAndKeepsTheWatch) {
  ASSERT_EQ(Run({"SET", "k", "1"}), "OK");
  EXPECT_EQ(Run({"WATCH", "k"}), "OK");
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"UNWATCH"}), "QUEUED");
  SwitchClient(1);
  ASSERT_EQ(Run({"SET", "k", "2"}), "OK");
  SwitchClient(0);
  EXPECT_EQ(Run({"SET", "k", "mine"}), "QUEUED");
  EXPECT_TRUE(IsNullArray(Run({"EXEC"})));
  EXPECT_EQ(Run({"GET", "k"}), "2");
  // Without a conflict UNWATCH is one element of EXEC's array.
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"UNWATCH"}), "QUEUED");
  EXPECT_EQ(Run({"PING"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 2u) << r.Debug();
  EXPECT_EQ(r[0], "OK");
  EXPECT_EQ(r[1], "PONG");
}

TEST_F(Transaction, WatchInsideMultiIsAnErrorThatDoesNotAbort) {
  EXPECT_EQ(Run({"MULTI"}), "OK");
  EXPECT_EQ(Run({"WATCH", "k"}).error(), "ERR WATCH inside MULTI is not allowed");
  EXPECT_EQ(Run({"SET", "w", "1"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 1u) << r.Debug();
  EXPECT_EQ(r[0], "OK");
  EXPECT_EQ(Run({"WATCH"}).error(), "ERR wrong number of arguments for 'watch' command");
}

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
