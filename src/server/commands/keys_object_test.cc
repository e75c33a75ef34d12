// COPY, TOUCH, OBJECT and KEYS at the output limit in process: Redis 7.0's replies (the single
// database, the encodings Redis would report, the FREQ text without LFU).
#include <gtest/gtest-spi.h>

#include <algorithm>
#include <string>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class KeyObjectCommand : public KvTest {};

TEST_F(KeyObjectCommand, Copy) {
  Run({"SET", "a", "v", "EX", "100"});
  EXPECT_TRUE(Run({"COPY", "a", "b"}).is_integer(1));
  EXPECT_EQ(Run({"GET", "b"}), "v");
  EXPECT_GT(Run({"TTL", "b"}).integer, 0);
  Run({"SET", "c", "old"});
  EXPECT_TRUE(Run({"COPY", "a", "c"}).is_integer(0));
  EXPECT_EQ(Run({"GET", "c"}), "old");
  EXPECT_TRUE(Run({"COPY", "a", "c", "REPLACE"}).is_integer(1));
  EXPECT_EQ(Run({"GET", "c"}), "v");
  EXPECT_TRUE(Run({"COPY", "missing", "d"}).is_integer(0));
  EXPECT_TRUE(Run({"COPY", "a", "e", "DB", "0"}).is_integer(1));
  EXPECT_EQ(Run({"COPY", "a", "f", "DB", "1"}).error(), "ERR DB index is out of range");
  EXPECT_EQ(Run({"COPY", "a", "f", "DB", "x"}).error(),
            "ERR value is not an integer or out of range");
  EXPECT_EQ(Run({"COPY", "a", "a"}).error(), "ERR source and destination objects are the same");
  EXPECT_EQ(Run({"COPY", "a", "f", "BOGUS"}).error(), "ERR syntax error");
  // The copies are independent: editing one leaves the other.
  Run({"APPEND", "b", "w"});
  EXPECT_EQ(Run({"GET", "a"}), "v");
  EXPECT_EQ(Run({"GET", "b"}), "vw");
}

TEST_F(KeyObjectCommand, Touch) {
  Run({"SET", "a", "1"});
  Run({"SET", "b", "1"});
  EXPECT_TRUE(Run({"TOUCH", "a", "b", "c", "a"}).is_integer(3));
}

TEST_F(KeyObjectCommand, ObjectEncodingAsRedis) {
  Run({"SET", "i", "12345"});
  EXPECT_EQ(Run({"OBJECT", "ENCODING", "i"}), "int");
  Run({"SET", "neg", "-9223372036854775808"});
  EXPECT_EQ(Run({"OBJECT", "ENCODING", "neg"}), "int");
  Run({"SET", "z", "012"});
  EXPECT_EQ(Run({"OBJECT", "ENCODING", "z"}), "embstr");
  Run({"SET", "e", std::string(44, 'x')});
  EXPECT_EQ(Run({"OBJECT", "ENCODING", "e"}), "embstr");
  Run({"SET", "r", std::string(45, 'x')});
  EXPECT_EQ(Run({"OBJECT", "encoding", "r"}), "raw");
  Run({"SET", "ap", "1"});
  Run({"APPEND", "ap", "2"});
  EXPECT_EQ(Run({"OBJECT", "ENCODING", "ap"}), "raw");  // edited in place, as Redis
  Run({"INCR", "ap"});
  EXPECT_EQ(Run({"OBJECT", "ENCODING", "ap"}), "int");
  EXPECT_EQ(Run({"OBJECT", "ENCODING", "missing"}).type, RespValue::Type::kNull);
}

TEST_F(KeyObjectCommand, ObjectOthers) {
  Run({"SET", "k", "v"});
  EXPECT_TRUE(Run({"OBJECT", "IDLETIME", "k"}).is_integer(0));
  EXPECT_TRUE(Run({"OBJECT", "REFCOUNT", "k"}).is_integer(1));
  Run({"SET", "small", "5"});
  EXPECT_TRUE(Run({"OBJECT", "REFCOUNT", "small"}).is_integer(2147483647));
  EXPECT_EQ(Run({"OBJECT", "FREQ", "k"}).error(),
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please "
            "note that when switching between policies at runtime LRU and LFU data will take "
            "some time to adjust.");
  EXPECT_EQ(Run({"OBJECT", "HELP"}).size(), 15u);
  EXPECT_EQ(Run({"OBJECT", "NOPE", "k"}).error(),
            "ERR unknown subcommand or wrong number of arguments for 'NOPE'. Try OBJECT HELP.");
  EXPECT_EQ(Run({"OBJECT", "ENCODING"}).error(),
            "ERR unknown subcommand or wrong number of arguments for 'ENCODING'. Try OBJECT "
            "HELP.");
}

// KEYS checks the client's output limit as its reply grows (every 64 keys)
// and stops once it is over: the connection then closes without the reply.
TEST_F(KeyObjectCommand, KeysStopsAtTheOutputLimit) {
  for (int i = 0; i < 200; ++i) Run({"SET", "k" + std::to_string(i), "v"});
  client().set_reply_over_limit_from(2);
  // The cut reply does not decode (the fixture says so; the client is closed then).
  EXPECT_NONFATAL_FAILURE(RunMany({"KEYS", "*"}), "reply does not decode");
  const std::string& wire = last_wire();
  EXPECT_EQ(client().limit_checks(), 2);
  EXPECT_EQ(std::count(wire.begin(), wire.end(), '$'), 128);  // 2 x 64 keys, not 200
  client().set_reply_over_limit_from(0);
  EXPECT_EQ(Run({"KEYS", "*"}).size(), 200u);
  EXPECT_EQ(client().limit_checks(), 3);  // 200 keys: checked after 64, 128, 192
}

}  // namespace
}  // namespace pion::server::testing
