// INCR, INCRBY, DECR, DECRBY and INCRBYFLOAT in process: Redis's number
// rules, overflow and float texts, the TTL kept, the reply formatting.
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class CounterCommand : public KvTest {};

TEST_F(CounterCommand, IncrDecrFamily) {
  EXPECT_TRUE(Run({"INCR", "n"}).is_integer(1));
  EXPECT_TRUE(Run({"INCRBY", "n", "41"}).is_integer(42));
  EXPECT_TRUE(Run({"DECR", "n"}).is_integer(41));
  EXPECT_TRUE(Run({"DECRBY", "n", "50"}).is_integer(-9));
  EXPECT_EQ(Run({"GET", "n"}), "-9");
  EXPECT_TRUE(Run({"DECRBY", "fresh", "3"}).is_integer(-3));
  // Shorter digits replace longer ones (no leftover bytes).
  Run({"SET", "s", "1000"});
  EXPECT_TRUE(Run({"DECRBY", "s", "999"}).is_integer(1));
  EXPECT_EQ(Run({"GET", "s"}), "1");
  EXPECT_TRUE(Run({"STRLEN", "s"}).is_integer(1));
}

TEST_F(CounterCommand, NumberRulesAndOverflow) {
  const std::string_view not_int = "ERR value is not an integer or out of range";
  Run({"SET", "x", " 1"});
  EXPECT_EQ(Run({"INCR", "x"}).error(), not_int);
  Run({"SET", "x", "1 "});
  EXPECT_EQ(Run({"INCR", "x"}).error(), not_int);
  Run({"SET", "x", "+1"});
  EXPECT_EQ(Run({"INCR", "x"}).error(), not_int);
  Run({"SET", "x", "12345678901234567890"});
  EXPECT_EQ(Run({"INCR", "x"}).error(), not_int);
  EXPECT_EQ(Run({"INCRBY", "x", "abc"}).error(), not_int);
  Run({"SET", "x", "9223372036854775807"});
  EXPECT_EQ(Run({"INCR", "x"}).error(), "ERR increment or decrement would overflow");
  EXPECT_EQ(Run({"GET", "x"}), "9223372036854775807");  // unchanged
  Run({"SET", "y", "-9223372036854775808"});
  EXPECT_EQ(Run({"DECR", "y"}).error(), "ERR increment or decrement would overflow");
  EXPECT_EQ(Run({"DECRBY", "z", "-9223372036854775808"}).error(), "ERR decrement would overflow");
  EXPECT_TRUE(Run({"EXISTS", "z"}).is_integer(0));
  EXPECT_TRUE(Run({"INCR", "fresh"}).is_integer(1));
}

TEST_F(CounterCommand, KeepsTtlAndType) {
  Run({"SET", "t", "5", "EX", "100"});
  EXPECT_TRUE(Run({"INCR", "t"}).is_integer(6));
  EXPECT_GT(Run({"TTL", "t"}).integer, 0);
  Run({"KV.PREFIX.REGISTER", "ns", "8", "fp16"});
  EXPECT_EQ(Run({"INCR", "ns"}).error(),
            "WRONGTYPE Operation against a key holding the wrong kind of value");
}

TEST_F(CounterCommand, IncrByFloat) {
  EXPECT_EQ(Run({"INCRBYFLOAT", "f", "10.5"}), "10.5");
  EXPECT_EQ(Run({"INCRBYFLOAT", "f", "0.1"}), "10.6");
  EXPECT_EQ(Run({"INCRBYFLOAT", "f", "-10.6"}), "0");
  Run({"SET", "g", "5.0e3"});
  EXPECT_EQ(Run({"INCRBYFLOAT", "g", "2.0e2"}), "5200");
  Run({"SET", "h", "1"});
  EXPECT_EQ(Run({"INCRBYFLOAT", "h", "1.5"}), "2.5");
  EXPECT_EQ(Run({"INCRBYFLOAT", "h", "abc"}).error(), "ERR value is not a valid float");
  EXPECT_EQ(Run({"INCRBYFLOAT", "h", " 1"}).error(), "ERR value is not a valid float");
  Run({"SET", "bad", "1a"});
  EXPECT_EQ(Run({"INCRBYFLOAT", "bad", "1"}).error(), "ERR value is not a valid float");
  Run({"SET", "big", "1e4932"});
  // Near long double's maximum: doubling it overflows to infinity, refused as Redis.
  EXPECT_EQ(Run({"INCRBYFLOAT", "big", "1e4932"}).error(),
            "ERR increment would produce NaN or Infinity");
  EXPECT_EQ(Run({"INCRBYFLOAT", "h", "inf"}).error(),
            "ERR increment would produce NaN or Infinity");
  EXPECT_EQ(Run({"GET", "h"}), "2.5");
}

}  // namespace
}  // namespace pion::server::testing
