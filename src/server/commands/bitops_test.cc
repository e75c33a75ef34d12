// SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO in
// process, against the replies Redis 7.0 gives for the same calls.
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class BitCommand : public KvTest {};

TEST_F(BitCommand, SetBitGetBit) {
  EXPECT_TRUE(Run({"SETBIT", "b", "7", "1"}).is_integer(0));
  EXPECT_EQ(Run({"GET", "b"}), std::string("\x01", 1));
  EXPECT_TRUE(Run({"SETBIT", "b", "7", "0"}).is_integer(1));
  EXPECT_TRUE(Run({"SETBIT", "b", "100", "1"}).is_integer(0));
  EXPECT_TRUE(Run({"STRLEN", "b"}).is_integer(13));
  EXPECT_TRUE(Run({"GETBIT", "b", "100"}).is_integer(1));
  EXPECT_TRUE(Run({"GETBIT", "b", "99"}).is_integer(0));
  EXPECT_TRUE(Run({"GETBIT", "b", "100000"}).is_integer(0));
  EXPECT_TRUE(Run({"GETBIT", "missing", "3"}).is_integer(0));
  EXPECT_EQ(Run({"SETBIT", "b", "-1", "1"}).error(),
            "ERR bit offset is not an integer or out of range");
  EXPECT_EQ(Run({"SETBIT", "b", "4294967296000", "1"}).error(),
            "ERR bit offset is not an integer or out of range");
  EXPECT_EQ(Run({"SETBIT", "b", "0", "2"}).error(), "ERR bit is not an integer or out of range");
  Run({"SET", "s", "`"});  // 0110 0000
  EXPECT_TRUE(Run({"GETBIT", "s", "1"}).is_integer(1));
  EXPECT_TRUE(Run({"GETBIT", "s", "3"}).is_integer(0));
}

TEST_F(BitCommand, BitCountRanges) {
  Run({"SET", "k", "foobar"});
  EXPECT_TRUE(Run({"BITCOUNT", "k"}).is_integer(26));
  EXPECT_TRUE(Run({"BITCOUNT", "k", "0", "0"}).is_integer(4));
  EXPECT_TRUE(Run({"BITCOUNT", "k", "1", "1"}).is_integer(6));
  EXPECT_TRUE(Run({"BITCOUNT", "k", "1", "1", "BYTE"}).is_integer(6));
  EXPECT_TRUE(Run({"BITCOUNT", "k", "5", "30", "BIT"}).is_integer(17));
  EXPECT_TRUE(Run({"BITCOUNT", "k", "-2", "-1"}).is_integer(7));
  EXPECT_TRUE(Run({"BITCOUNT", "k", "-1", "-2"}).is_integer(0));
  EXPECT_TRUE(Run({"BITCOUNT", "missing"}).is_integer(0));
  EXPECT_EQ(Run({"BITCOUNT", "k", "0"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"BITCOUNT", "k", "0", "1", "WORD"}).error(), "ERR syntax error");
}

TEST_F(BitCommand, BitPos) {
  Run({"SET", "k", std::string("\xff\xf0\x00", 3)});
  EXPECT_TRUE(Run({"BITPOS", "k", "0"}).is_integer(12));
  Run({"SET", "k", std::string("\x00\xff\xf0", 3)});
  EXPECT_TRUE(Run({"BITPOS", "k", "1", "0"}).is_integer(8));
  EXPECT_TRUE(Run({"BITPOS", "k", "1", "2"}).is_integer(16));
  EXPECT_TRUE(Run({"BITPOS", "k", "1", "2", "-1", "BYTE"}).is_integer(16));
  EXPECT_TRUE(Run({"BITPOS", "k", "1", "7", "15", "BIT"}).is_integer(8));
  EXPECT_TRUE(Run({"BITPOS", "k", "1", "7", "-3", "BIT"}).is_integer(8));
  Run({"SET", "ones", std::string("\xff\xff", 2)});
  EXPECT_TRUE(Run({"BITPOS", "ones", "0"}).is_integer(16));  // past the end
  EXPECT_TRUE(Run({"BITPOS", "ones", "0", "0", "-1"}).is_integer(-1));
  EXPECT_TRUE(Run({"BITPOS", "missing", "1"}).is_integer(-1));
  EXPECT_TRUE(Run({"BITPOS", "missing", "0"}).is_integer(0));
  EXPECT_EQ(Run({"BITPOS", "k", "2"}).error(), "ERR The bit argument must be 1 or 0.");
}

TEST_F(BitCommand, BitOp) {
  Run({"SET", "a", "foobar"});
  Run({"SET", "b", "abcdef"});
  EXPECT_TRUE(Run({"BITOP", "AND", "d", "a", "b"}).is_integer(6));
  EXPECT_EQ(Run({"GET", "d"}), "`bc`ab");
  EXPECT_TRUE(Run({"BITOP", "or", "d", "a", "b"}).is_integer(6));
  EXPECT_EQ(Run({"GET", "d"}), "goofev");
  EXPECT_TRUE(Run({"BITOP", "XOR", "d", "a", "missing"}).is_integer(6));
  EXPECT_EQ(Run({"GET", "d"}), "foobar");
  EXPECT_TRUE(Run({"BITOP", "NOT", "d", "a"}).is_integer(6));
  EXPECT_EQ(Run({"GET", "d"}), "\x99\x90\x90\x9d\x9e\x8d");
  EXPECT_EQ(Run({"BITOP", "NOT", "d", "a", "b"}).error(),
            "ERR BITOP NOT must be called with a single source key.");
  EXPECT_EQ(Run({"BITOP", "NAND", "d", "a"}).error(), "ERR syntax error");
  EXPECT_TRUE(Run({"BITOP", "AND", "d", "none1", "none2"}).is_integer(0));
  EXPECT_TRUE(Run({"EXISTS", "d"}).is_integer(0));
}

TEST_F(BitCommand, BitField) {
  RespValue r = Run({"BITFIELD", "bf", "INCRBY", "i5", "100", "1", "GET", "u4", "0"});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].is_integer(1));
  EXPECT_TRUE(r[1].is_integer(0));
  // Overflow modes (Redis's documentation example).
  Run({"DEL", "bf"});
  for (int i = 0; i < 2; ++i) {
    r = Run({"BITFIELD", "bf", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2", "102",
             "1"});
    EXPECT_TRUE(r[0].is_integer(i + 1));
    EXPECT_TRUE(r[1].is_integer(i + 1));
  }
  r = Run({"BITFIELD", "bf", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2", "102",
           "1"});
  EXPECT_TRUE(r[0].is_integer(3));
  EXPECT_TRUE(r[1].is_integer(3));
  r = Run({"BITFIELD", "bf", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2", "102",
           "1"});
  EXPECT_TRUE(r[0].is_integer(0));  // wrapped
  EXPECT_TRUE(r[1].is_integer(3));  // saturated
  r = Run({"BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u2", "102", "1"});
  EXPECT_EQ(r[0].type, RespValue::Type::kNull);
  // SET returns the old value; signed wrap; #-offsets.
  Run({"DEL", "s"});
  r = Run({"BITFIELD", "s", "SET", "i8", "#1", "-100", "GET", "i8", "8", "SET", "i8", "#1", "200"});
  EXPECT_TRUE(r[0].is_integer(0));
  EXPECT_TRUE(r[1].is_integer(-100));
  EXPECT_TRUE(r[2].is_integer(-100));
  EXPECT_TRUE(Run({"BITFIELD", "s", "GET", "i8", "8"})[0].is_integer(-56));
  EXPECT_TRUE(Run({"STRLEN", "s"}).is_integer(2));
  r = Run({"BITFIELD", "s", "OVERFLOW", "SAT", "SET", "i8", "8", "1000", "GET", "i8", "8"});
  EXPECT_TRUE(r[1].is_integer(127));
  r = Run({"BITFIELD", "w", "SET", "i64", "0", "-9223372036854775808", "INCRBY", "i64", "0", "-1"});
  EXPECT_TRUE(r[1].is_integer(9223372036854775807));
  r = Run({"BITFIELD", "u", "SET", "u8", "0", "-1", "GET", "u8", "0"});
  EXPECT_TRUE(r[1].is_integer(255));
  EXPECT_EQ(Run({"BITFIELD", "bf", "GET", "u64", "0"}).error(),
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not "
            "supported but i64 is.");
  EXPECT_EQ(Run({"BITFIELD", "bf", "OVERFLOW", "MAYBE"}).error(),
            "ERR Invalid OVERFLOW type specified");
  EXPECT_EQ(Run({"BITFIELD", "bf", "GET", "u8"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"BITFIELD", "bf"}).size(), 0u);
  EXPECT_EQ(Run({"BITFIELD_RO", "bf", "SET", "u8", "0", "1"}).error(),
            "ERR BITFIELD_RO only supports the GET subcommand");
  EXPECT_TRUE(Run({"BITFIELD_RO", "s", "GET", "i8", "8"})[0].is_integer(127));
  EXPECT_TRUE(Run({"BITFIELD_RO", "missing", "GET", "u8", "0"})[0].is_integer(0));
}

}  // namespace
}  // namespace pion::server::testing
