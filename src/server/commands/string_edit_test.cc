// GETSET, SETRANGE, SUBSTR, LCS and the in-place APPEND in process: Redis
// 7.0's replies and texts, the proto-max-bulk-len limit, a reply's pinned
// bytes surviving an edit (copy on write).
#include "server/commands/testing/command_fixture.h"
#include "store/store.h"
#include "store/string_ops.h"

namespace pion::server::testing {
namespace {

class StringEditCommand : public KvTest {};

TEST_F(StringEditCommand, GetSetReturnsOldAndDropsTtl) {
  EXPECT_EQ(Run({"GETSET", "k", "a"}).type, RespValue::Type::kNull);
  Run({"EXPIRE", "k", "100"});
  EXPECT_EQ(Run({"GETSET", "k", "b"}), "a");
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(-1));
  EXPECT_EQ(Run({"GET", "k"}), "b");
}

TEST_F(StringEditCommand, SetRange) {
  EXPECT_TRUE(Run({"SETRANGE", "k", "0", ""}).is_integer(0));
  EXPECT_TRUE(Run({"EXISTS", "k"}).is_integer(0));
  EXPECT_TRUE(Run({"SETRANGE", "k", "3", "abc"}).is_integer(6));
  EXPECT_EQ(Run({"GET", "k"}), std::string("\0\0\0abc", 6));
  EXPECT_TRUE(Run({"SETRANGE", "k", "1", "X"}).is_integer(6));
  EXPECT_EQ(Run({"GET", "k"}), std::string("\0X\0abc", 6));
  EXPECT_TRUE(Run({"SETRANGE", "k", "0", ""}).is_integer(6));
  Run({"SET", "h", "Hello World"});
  EXPECT_TRUE(Run({"SETRANGE", "h", "6", "Redis"}).is_integer(11));
  EXPECT_EQ(Run({"GET", "h"}), "Hello Redis");
  EXPECT_EQ(Run({"SETRANGE", "h", "-1", "x"}).error(), "ERR offset is out of range");
  EXPECT_EQ(Run({"SETRANGE", "h", "x", "x"}).error(),
            "ERR value is not an integer or out of range");
  EXPECT_EQ(Run({"SETRANGE", "h", "2000000000", "x"}).error(),
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
  EXPECT_EQ(Run({"GET", "h"}), "Hello Redis");
}

TEST_F(StringEditCommand, SubstrIsGetRange) {
  Run({"SET", "k", "Hello World"});
  EXPECT_EQ(Run({"SUBSTR", "k", "0", "4"}), "Hello");
  EXPECT_EQ(Run({"SUBSTR", "k", "-5", "-1"}), "World");
}

TEST_F(StringEditCommand, Lcs) {
  Run({"SET", "a", "ohmytext"});
  Run({"SET", "b", "mynewtext"});
  EXPECT_EQ(Run({"LCS", "a", "b"}), "mytext");
  EXPECT_TRUE(Run({"LCS", "a", "b", "LEN"}).is_integer(6));
  RespValue idx = Run({"LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"});
  ASSERT_EQ(idx.size(), 4u);  // RESP2 flat map
  EXPECT_EQ(idx[0], "matches");
  ASSERT_EQ(idx[1].size(), 1u);
  EXPECT_TRUE(idx[1][0][0][0].is_integer(4));
  EXPECT_TRUE(idx[1][0][0][1].is_integer(7));
  EXPECT_TRUE(idx[1][0][1][0].is_integer(5));
  EXPECT_TRUE(idx[1][0][1][1].is_integer(8));
  EXPECT_TRUE(idx[1][0][2].is_integer(4));
  EXPECT_TRUE(idx[3].is_integer(6));
  RespValue all = Run({"LCS", "a", "b", "IDX"});
  EXPECT_EQ(all[1].size(), 2u);  // "text" and "my"
  EXPECT_EQ(Run({"LCS", "a", "b", "LEN", "IDX"}).error(),
            "ERR If you want both the length and indexes, please just use IDX.");
  EXPECT_EQ(Run({"LCS", "a", "missing"}), "");
  Run({"KV.PREFIX.REGISTER", "ns", "8", "fp16"});
  EXPECT_EQ(Run({"LCS", "a", "ns"}).error(), "ERR The specified keys must contain string values");
}

TEST_F(StringEditCommand, AppendGrowsInPlaceAndKeepsPinnedBytes) {
  Run({"SET", "k", "abc"});
  store::StrRef pinned = *store::OpGet({*server().store()}, "k");  // as a GET reply in flight
  EXPECT_TRUE(Run({"APPEND", "k", "def"}).is_integer(6));
  EXPECT_EQ(pinned->view(), "abc");  // copy on write: the reader's bytes are unchanged
  pinned.reset();
  const void* before = (*store::OpGet({*server().store()}, "k"))->data;
  for (int i = 0; i < 5; ++i) Run({"APPEND", "k", "x"});
  // Room was left ahead: the later appends wrote where the value lies.
  EXPECT_EQ((*store::OpGet({*server().store()}, "k"))->data, before);
  EXPECT_EQ(Run({"GET", "k"}), "abcdefxxxxx");
  EXPECT_EQ(Run({"OBJECT", "ENCODING", "k"}), "raw");
}

class SmallBulkTest : public CommandTest {
 protected:
  static Config Small() {
    Config c = KvConfig();
    c.proto_max_bulk_len = 10;
    return c;
  }
  SmallBulkTest() : CommandTest(Small()) {}
};

TEST_F(SmallBulkTest, AppendRefusedPastProtoMaxBulkLen) {
  Run({"SET", "k", "12345678"});
  EXPECT_EQ(Run({"APPEND", "k", "abc"}).error(),
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
  EXPECT_EQ(Run({"GET", "k"}), "12345678");
  EXPECT_TRUE(Run({"APPEND", "k", "ab"}).is_integer(10));
  EXPECT_EQ(Run({"SETRANGE", "k", "8", "abc"}).error(),
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
}

}  // namespace
}  // namespace pion::server::testing
