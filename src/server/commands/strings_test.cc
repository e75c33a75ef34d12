// The strings and generic keys families in process: SET and its options,
// GET, MSET / MSETNX / MGET, GETDEL, GETEX, STRLEN, APPEND, SETNX, SETEX /
// PSETEX, DEL / UNLINK / EXISTS, TYPE, RENAME / RENAMENX, the expire family
// (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, PERSIST), DBSIZE, KEYS,
// SCAN, RANDOMKEY and FLUSHALL. Every reply and error text is Redis 7.0's
// (checked against redis-server 7.0.15). The INCR family, GETSET / SETRANGE /
// GETRANGE / LCS, the bit commands and COPY / TOUCH / OBJECT have their own
// files (counters_test.cc, string_edit_test.cc, bitops_test.cc,
// keys_object_test.cc).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

constexpr std::string_view kSyntax = "ERR syntax error";
constexpr std::string_view kNotInt = "ERR value is not an integer or out of range";
// A unix time in the far future (2100-01-01T00:00:00Z), in seconds and ms.
constexpr std::string_view kFarSec = "4102444800";
constexpr std::string_view kFarMs = "4102444800000";

bool IsNull(const RespValue& v) { return v.type == RespValue::Type::kNull; }

// An integer reply in [lo, hi] (a TTL read right after it was set: no time
// is assumed to pass, but a second boundary may be crossed).
::testing::AssertionResult IntIn(const RespValue& v, int64_t lo, int64_t hi) {
  if (v.type == RespValue::Type::kInteger && v.integer >= lo && v.integer <= hi)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << v.Debug() << " is not an integer in [" << lo << ", " << hi << "]";
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

class Strings : public KvTest {};

// ---- GET / SET ----------------------------------------------------------

TEST_F(Strings, GetMissingIsNilAndSetOverwrites) {
  EXPECT_TRUE(IsNull(Run({"GET", "k"})));
  EXPECT_EQ(Run({"SET", "k", "v"}), "OK");
  EXPECT_EQ(Run({"GET", "k"}), "v");
  EXPECT_EQ(Run({"SET", "k", "w"}), "OK");
  EXPECT_EQ(Run({"GET", "k"}), "w");
  EXPECT_EQ(Run({"SET", "e", ""}), "OK");
  RespValue empty = Run({"GET", "e"});
  EXPECT_EQ(empty.type, RespValue::Type::kBulk);
  EXPECT_EQ(empty, "");
  EXPECT_EQ(Run({"SET", "k"}).error(), "ERR wrong number of arguments for 'set' command");
  EXPECT_EQ(Run({"GET", "k", "x"}).error(), "ERR wrong number of arguments for 'get' command");
}

TEST_F(Strings, SetNxXx) {
  EXPECT_EQ(Run({"SET", "k", "v", "NX"}), "OK");
  EXPECT_TRUE(IsNull(Run({"SET", "k", "v2", "NX"})));
  EXPECT_EQ(Run({"GET", "k"}), "v");
  EXPECT_EQ(Run({"SET", "k", "v3", "XX"}), "OK");
  EXPECT_EQ(Run({"GET", "k"}), "v3");
  EXPECT_TRUE(IsNull(Run({"SET", "missing", "v", "XX"})));
  EXPECT_TRUE(Run({"EXISTS", "missing"}).is_integer(0));
  // Lower case options, as Redis.
  EXPECT_TRUE(IsNull(Run({"SET", "k", "v4", "nx"})));
  EXPECT_EQ(Run({"SET", "k", "v4", "xx"}), "OK");
  // Repeating an option is allowed.
  EXPECT_TRUE(IsNull(Run({"SET", "k", "v", "NX", "NX"})));
}

TEST_F(Strings, SetNxAndXxTogetherIsASyntaxError) {
  Run({"SET", "k", "v"});
  EXPECT_EQ(Run({"SET", "k", "w", "NX", "XX"}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "w", "XX", "NX"}).error(), kSyntax);
  EXPECT_EQ(Run({"GET", "k"}), "v");
}

TEST_F(Strings, SetGet) {
  EXPECT_TRUE(IsNull(Run({"SET", "k", "a", "GET"})));  // a missing key: nil, and set
  EXPECT_EQ(Run({"GET", "k"}), "a");
  EXPECT_EQ(Run({"SET", "k", "b", "GET"}), "a");
  EXPECT_EQ(Run({"GET", "k"}), "b");
  // With NX (allowed since Redis 7.0): the old value, nothing set.
  EXPECT_EQ(Run({"SET", "k", "c", "NX", "GET"}), "b");
  EXPECT_EQ(Run({"SET", "k", "c", "GET", "NX"}), "b");
  EXPECT_EQ(Run({"GET", "k"}), "b");
  EXPECT_TRUE(IsNull(Run({"SET", "n", "v", "NX", "GET"})));
  EXPECT_EQ(Run({"GET", "n"}), "v");
  // With XX: nil and nothing set on a missing key.
  EXPECT_TRUE(IsNull(Run({"SET", "x", "v", "XX", "GET"})));
  EXPECT_TRUE(Run({"EXISTS", "x"}).is_integer(0));
  EXPECT_EQ(Run({"SET", "k", "d", "XX", "GET"}), "b");
  EXPECT_EQ(Run({"GET", "k"}), "d");
}

TEST_F(Strings, SetExPx) {
  EXPECT_EQ(Run({"SET", "k", "v", "EX", "100"}), "OK");
  EXPECT_TRUE(IntIn(Run({"TTL", "k"}), 99, 100));
  EXPECT_TRUE(IntIn(Run({"PTTL", "k"}), 99000, 100000));
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "100000"}), "OK");
  EXPECT_TRUE(IntIn(Run({"PTTL", "k"}), 99000, 100000));
  EXPECT_EQ(Run({"SET", "k", "v", "px", "5000"}), "OK");
  EXPECT_TRUE(IntIn(Run({"PTTL", "k"}), 4000, 5000));
  // A plain SET drops the TTL.
  EXPECT_EQ(Run({"SET", "k", "v"}), "OK");
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(-1));
}

// As Redis 7.0: the same expire option may be given twice (the later value
// wins), and every option's syntax is checked before the number is read.
TEST_F(Strings, RepeatedExpireOptionAndSyntaxFirst) {
  EXPECT_EQ(Run({"SET", "k", "v", "EX", "10", "EX", "200"}), "OK");
  EXPECT_TRUE(IntIn(Run({"TTL", "k"}), 199, 200));
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "10", "PX", "200000"}), "OK");
  EXPECT_TRUE(IntIn(Run({"PTTL", "k"}), 199000, 200000));
  EXPECT_EQ(Run({"SET", "k", "v", "EX", "10", "EX", "0"}).error(),
            "ERR invalid expire time in 'set' command");
  EXPECT_EQ(Run({"SET", "k", "v", "EX", "abc", "BOGUS"}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "v", "EX", "0", "NX", "XX"}).error(), kSyntax);
  ASSERT_EQ(Run({"SET", "k", "v"}), "OK");
  EXPECT_EQ(Run({"GETEX", "k", "EX", "10", "EX", "20"}), "v");
  EXPECT_TRUE(IntIn(Run({"TTL", "k"}), 19, 20));
  EXPECT_EQ(Run({"GETEX", "k", "PERSIST", "PERSIST"}), "v");
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(-1));
  EXPECT_EQ(Run({"GETEX", "k", "EX", "abc", "BOGUS"}).error(), kSyntax);
}

// As Redis 7.0: GETEX checks its options' syntax, then looks the key up, and
// reads the number only for a key that exists, so a missing key answers nil.
TEST_F(Strings, GetExOnAMissingKeyIgnoresTheNumber) {
  EXPECT_TRUE(IsNull(Run({"GETEX", "missing", "EX", "0"})));
  EXPECT_TRUE(IsNull(Run({"GETEX", "missing", "EX", "abc"})));
  EXPECT_TRUE(IsNull(Run({"GETEX", "missing", "PX", "-5"})));
  EXPECT_TRUE(IsNull(Run({"GETEX", "missing", "EX", "9223372036854775807"})));
  // A key that exists: the number's error, and nothing changed.
  ASSERT_EQ(Run({"SET", "k", "v"}), "OK");
  EXPECT_EQ(Run({"GETEX", "k", "EX", "0"}).error(), "ERR invalid expire time in 'getex' command");
  EXPECT_EQ(Run({"GETEX", "k", "EX", "abc"}).error(),
            "ERR value is not an integer or out of range");
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(-1));
  // A key of another type (a namespace): WRONGTYPE comes before the number.
  ASSERT_EQ(Run({"KV.PREFIX.REGISTER", "ns", "8", "fp16"}), "OK");
  EXPECT_EQ(Run({"GETEX", "ns", "EX", "0"}).error().substr(0, 9), "WRONGTYPE");
}

TEST_F(Strings, SetExatPxat) {
  EXPECT_EQ(Run({"SET", "k", "v", "EXAT", kFarSec}), "OK");
  EXPECT_TRUE(Run({"EXPIRETIME", "k"}).is_integer(4102444800));
  EXPECT_EQ(Run({"SET", "k", "v", "PXAT", kFarMs}), "OK");
  EXPECT_TRUE(Run({"PEXPIRETIME", "k"}).is_integer(4102444800000));
  // A time already past sets the key expired: it is gone at once.
  EXPECT_EQ(Run({"SET", "old", "v", "EXAT", "1"}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "old"}).is_integer(0));
  EXPECT_TRUE(IsNull(Run({"GET", "old"})));
  EXPECT_EQ(Run({"SET", "old", "v", "PXAT", "1"}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "old"}).is_integer(0));
}

TEST_F(Strings, SetKeepTtl) {
  EXPECT_EQ(Run({"SET", "k", "v", "EX", "100"}), "OK");
  EXPECT_EQ(Run({"SET", "k", "v2", "KEEPTTL"}), "OK");
  EXPECT_TRUE(IntIn(Run({"TTL", "k"}), 99, 100));
  EXPECT_EQ(Run({"GET", "k"}), "v2");
  EXPECT_EQ(Run({"SET", "k", "v3", "KEEPTTL", "KEEPTTL"}), "OK");
  EXPECT_TRUE(IntIn(Run({"TTL", "k"}), 99, 100));
  EXPECT_EQ(Run({"SET", "k", "v4"}), "OK");
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(-1));
  // On a key without a TTL (or a new one) KEEPTTL keeps none.
  EXPECT_EQ(Run({"SET", "fresh", "v", "KEEPTTL"}), "OK");
  EXPECT_TRUE(Run({"TTL", "fresh"}).is_integer(-1));
}

TEST_F(Strings, SetOptionSyntaxErrors) {
  Run({"SET", "k", "v"});
  EXPECT_EQ(Run({"SET", "k", "w", "EX", "10", "PX", "100"}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "w", "EX", "10", "EXAT", kFarSec}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "w", "PXAT", kFarMs, "EX", "10"}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "w", "KEEPTTL", "EX", "10"}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "w", "EX", "10", "KEEPTTL"}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "w", "EX"}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "w", "PXAT"}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "w", "BOGUS"}).error(), kSyntax);
  EXPECT_EQ(Run({"SET", "k", "w", "EX", "abc"}).error(), kNotInt);
  EXPECT_EQ(Run({"SET", "k", "w", "PX", "1.5"}).error(), kNotInt);
  EXPECT_EQ(Run({"GET", "k"}), "v");  // nothing was set
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(-1));
}

TEST_F(Strings, SetInvalidExpireTime) {
  const std::string_view bad = "ERR invalid expire time in 'set' command";
  Run({"SET", "k", "v"});
  for (const char* opt : {"EX", "PX", "EXAT", "PXAT"}) {
    SCOPED_TRACE(opt);
    EXPECT_EQ(Run({"SET", "k", "w", opt, "0"}).error(), bad);
    EXPECT_EQ(Run({"SET", "k", "w", opt, "-1"}).error(), bad);
  }
  // Past the largest time in ms.
  EXPECT_EQ(Run({"SET", "k", "w", "EX", "9999999999999999"}).error(), bad);
  EXPECT_EQ(Run({"SET", "k", "w", "EX", "9223372036854775807"}).error(), bad);
  EXPECT_EQ(Run({"SET", "k", "w", "PX", "9223372036854775807"}).error(), bad);
  EXPECT_EQ(Run({"GET", "k"}), "v");
}

// ---- MSET / MSETNX / MGET ------------------------------------------------

TEST_F(Strings, MsetMget) {
  EXPECT_EQ(Run({"MSET", "a", "1", "b", "2"}), "OK");
  RespValue r = Run({"MGET", "a", "nope", "b", "a"});
  ASSERT_EQ(r.type, RespValue::Type::kArray) << r.Debug();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], "1");
  EXPECT_TRUE(IsNull(r[1]));
  EXPECT_EQ(r[2], "2");
  EXPECT_EQ(r[3], "1");
  // A later pair for the same key wins.
  EXPECT_EQ(Run({"MSET", "c", "x", "c", "y"}), "OK");
  EXPECT_EQ(Run({"GET", "c"}), "y");
  // MSET drops a TTL, as SET.
  Run({"SET", "t", "v", "EX", "100"});
  EXPECT_EQ(Run({"MSET", "t", "w"}), "OK");
  EXPECT_TRUE(Run({"TTL", "t"}).is_integer(-1));
  RespValue none = Run({"MGET", "x", "y"});
  ASSERT_EQ(none.size(), 2u);
  EXPECT_TRUE(IsNull(none[0]));
  EXPECT_TRUE(IsNull(none[1]));
}

TEST_F(Strings, MsetMgetArity) {
  const std::string_view mset = "ERR wrong number of arguments for 'mset' command";
  EXPECT_EQ(Run({"MSET"}).error(), mset);
  EXPECT_EQ(Run({"MSET", "a"}).error(), mset);
  EXPECT_EQ(Run({"MSET", "a", "1", "b"}).error(), mset);
  EXPECT_TRUE(Run({"EXISTS", "a"}).is_integer(0));
  EXPECT_EQ(Run({"MGET"}).error(), "ERR wrong number of arguments for 'mget' command");
  EXPECT_EQ(Run({"MSETNX", "c"}).error(), "ERR wrong number of arguments for 'msetnx' command");
  EXPECT_EQ(Run({"MSETNX", "c", "1", "d"}).error(),
            "ERR wrong number of arguments for 'msetnx' command");
}

TEST_F(Strings, Msetnx) {
  EXPECT_EQ(Run({"SET", "a", "1"}), "OK");
  // One key exists: nothing is set.
  EXPECT_TRUE(Run({"MSETNX", "a", "9", "c", "3"}).is_integer(0));
  EXPECT_EQ(Run({"GET", "a"}), "1");
  EXPECT_TRUE(Run({"EXISTS", "c"}).is_integer(0));
  EXPECT_TRUE(Run({"MSETNX", "c", "3", "d", "4"}).is_integer(1));
  EXPECT_EQ(Run({"MGET", "c", "d"}).Strings(), (std::vector<std::string>{"3", "4"}));
  // The same new key twice: the last value wins.
  EXPECT_TRUE(Run({"MSETNX", "x", "1", "x", "2"}).is_integer(1));
  EXPECT_EQ(Run({"GET", "x"}), "2");
}

// ---- GETDEL / GETEX --------------------------------------------------------

TEST_F(Strings, GetDel) {
  Run({"SET", "a", "1", "EX", "100"});
  EXPECT_EQ(Run({"GETDEL", "a"}), "1");
  EXPECT_TRUE(Run({"EXISTS", "a"}).is_integer(0));
  EXPECT_TRUE(Run({"TTL", "a"}).is_integer(-2));
  EXPECT_TRUE(IsNull(Run({"GETDEL", "a"})));
  EXPECT_EQ(Run({"GETDEL"}).error(), "ERR wrong number of arguments for 'getdel' command");
}

TEST_F(Strings, GetEx) {
  Run({"SET", "g", "v", "EX", "100"});
  EXPECT_EQ(Run({"GETEX", "g"}), "v");  // no option: the TTL is left
  EXPECT_TRUE(IntIn(Run({"TTL", "g"}), 99, 100));
  EXPECT_EQ(Run({"GETEX", "g", "PERSIST"}), "v");
  EXPECT_TRUE(Run({"TTL", "g"}).is_integer(-1));
  EXPECT_EQ(Run({"GETEX", "g", "EX", "50"}), "v");
  EXPECT_TRUE(IntIn(Run({"TTL", "g"}), 49, 50));
  EXPECT_EQ(Run({"GETEX", "g", "PX", "50000"}), "v");
  EXPECT_TRUE(IntIn(Run({"PTTL", "g"}), 49000, 50000));
  EXPECT_EQ(Run({"GETEX", "g", "EXAT", kFarSec}), "v");
  EXPECT_TRUE(Run({"EXPIRETIME", "g"}).is_integer(4102444800));
  EXPECT_EQ(Run({"GETEX", "g", "PXAT", kFarMs}), "v");
  EXPECT_TRUE(Run({"PEXPIRETIME", "g"}).is_integer(4102444800000));
  EXPECT_TRUE(IsNull(Run({"GETEX", "missing"})));
  EXPECT_TRUE(IsNull(Run({"GETEX", "missing", "EX", "10"})));
  EXPECT_TRUE(Run({"EXISTS", "missing"}).is_integer(0));
}

TEST_F(Strings, GetExErrors) {
  Run({"SET", "g", "v"});
  EXPECT_EQ(Run({"GETEX", "g", "BOGUS"}).error(), kSyntax);
  EXPECT_EQ(Run({"GETEX", "g", "EX"}).error(), kSyntax);
  EXPECT_EQ(Run({"GETEX", "g", "EX", "10", "PX", "100"}).error(), kSyntax);
  EXPECT_EQ(Run({"GETEX", "g", "PERSIST", "EX", "10"}).error(), kSyntax);
  EXPECT_EQ(Run({"GETEX", "g", "EX", "abc"}).error(), kNotInt);
  EXPECT_EQ(Run({"GETEX", "g", "EX", "0"}).error(), "ERR invalid expire time in 'getex' command");
  EXPECT_EQ(Run({"GETEX", "g", "PX", "-5"}).error(), "ERR invalid expire time in 'getex' command");
  // The options are checked before the key is looked up.
  EXPECT_EQ(Run({"GETEX", "missing", "BOGUS"}).error(), kSyntax);
  EXPECT_TRUE(Run({"TTL", "g"}).is_integer(-1));
}

// ---- STRLEN / APPEND / SETNX / SETEX / PSETEX -------------------------------

TEST_F(Strings, Strlen) {
  EXPECT_TRUE(Run({"STRLEN", "missing"}).is_integer(0));
  Run({"SET", "s", "hello"});
  EXPECT_TRUE(Run({"STRLEN", "s"}).is_integer(5));
  Run({"SET", "s", ""});
  EXPECT_TRUE(Run({"STRLEN", "s"}).is_integer(0));
  EXPECT_TRUE(Run({"EXISTS", "s"}).is_integer(1));  // an empty string is a key
  Run({"SET", "n", "12345"});
  EXPECT_TRUE(Run({"STRLEN", "n"}).is_integer(5));
}

TEST_F(Strings, Append) {
  EXPECT_TRUE(Run({"APPEND", "new", "abc"}).is_integer(3));
  EXPECT_TRUE(Run({"APPEND", "new", "def"}).is_integer(6));
  EXPECT_EQ(Run({"GET", "new"}), "abcdef");
  EXPECT_TRUE(Run({"APPEND", "new", ""}).is_integer(6));
  // APPEND keeps the TTL.
  Run({"SET", "t", "v", "EX", "100"});
  EXPECT_TRUE(Run({"APPEND", "t", "w"}).is_integer(2));
  EXPECT_TRUE(IntIn(Run({"TTL", "t"}), 99, 100));
  EXPECT_EQ(Run({"GET", "t"}), "vw");
}

TEST_F(Strings, SetNx) {
  EXPECT_TRUE(Run({"SETNX", "n", "1"}).is_integer(1));
  EXPECT_TRUE(Run({"SETNX", "n", "2"}).is_integer(0));
  EXPECT_EQ(Run({"GET", "n"}), "1");
  EXPECT_EQ(Run({"SETNX", "n"}).error(), "ERR wrong number of arguments for 'setnx' command");
}

TEST_F(Strings, SetExPsetEx) {
  EXPECT_EQ(Run({"SETEX", "e", "100", "v"}), "OK");
  EXPECT_EQ(Run({"GET", "e"}), "v");
  EXPECT_TRUE(IntIn(Run({"TTL", "e"}), 99, 100));
  EXPECT_EQ(Run({"PSETEX", "p", "100000", "v"}), "OK");
  EXPECT_EQ(Run({"GET", "p"}), "v");
  EXPECT_TRUE(IntIn(Run({"PTTL", "p"}), 99000, 100000));
  EXPECT_EQ(Run({"SETEX", "e", "100"}).error(),
            "ERR wrong number of arguments for 'setex' command");
}

TEST_F(Strings, SetExPsetExInvalidExpireTime) {
  const std::string_view setex = "ERR invalid expire time in 'setex' command";
  const std::string_view psetex = "ERR invalid expire time in 'psetex' command";
  EXPECT_EQ(Run({"SETEX", "e", "0", "v"}).error(), setex);
  EXPECT_EQ(Run({"SETEX", "e", "-1", "v"}).error(), setex);
  EXPECT_EQ(Run({"SETEX", "e", "9223372036854775807", "v"}).error(), setex);
  EXPECT_EQ(Run({"SETEX", "e", "abc", "v"}).error(), kNotInt);
  EXPECT_EQ(Run({"PSETEX", "p", "0", "v"}).error(), psetex);
  EXPECT_EQ(Run({"PSETEX", "p", "-1", "v"}).error(), psetex);
  EXPECT_EQ(Run({"PSETEX", "p", "9223372036854775807", "v"}).error(), psetex);
  EXPECT_EQ(Run({"PSETEX", "p", "abc", "v"}).error(), kNotInt);
  EXPECT_TRUE(Run({"EXISTS", "e", "p"}).is_integer(0));
}

// ---- DEL / UNLINK / EXISTS / TYPE ------------------------------------------

TEST_F(Strings, DelUnlinkExists) {
  Run({"MSET", "a", "1", "b", "2"});
  EXPECT_TRUE(Run({"EXISTS", "a", "a", "b", "c"}).is_integer(3));  // repetitions count
  EXPECT_TRUE(Run({"DEL", "a", "b", "c", "a"}).is_integer(2));     // each key removed once
  EXPECT_TRUE(Run({"DEL", "a"}).is_integer(0));
  EXPECT_TRUE(Run({"EXISTS", "a", "b"}).is_integer(0));
  Run({"MSET", "a", "1", "b", "2"});
  EXPECT_TRUE(Run({"UNLINK", "a", "a", "b"}).is_integer(2));
  EXPECT_TRUE(Run({"UNLINK", "a"}).is_integer(0));
  Run({"SET", "a", "1"});
  EXPECT_TRUE(Run({"UNLINK", "a", "a"}).is_integer(1));
  EXPECT_EQ(Run({"DEL"}).error(), "ERR wrong number of arguments for 'del' command");
  EXPECT_EQ(Run({"UNLINK"}).error(), "ERR wrong number of arguments for 'unlink' command");
  EXPECT_EQ(Run({"EXISTS"}).error(), "ERR wrong number of arguments for 'exists' command");
}

TEST_F(Strings, Type) {
  Run({"SET", "a", "1"});
  RespValue t = Run({"TYPE", "a"});
  EXPECT_EQ(t.type, RespValue::Type::kSimple);
  EXPECT_EQ(t, "string");
  RespValue none = Run({"TYPE", "missing"});
  EXPECT_EQ(none.type, RespValue::Type::kSimple);
  EXPECT_EQ(none, "none");
}

// ---- RENAME / RENAMENX -------------------------------------------------------

TEST_F(Strings, Rename) {
  EXPECT_EQ(Run({"RENAME", "missing", "x"}).error(), "ERR no such key");
  Run({"SET", "r", "v", "EX", "100"});
  EXPECT_EQ(Run({"RENAME", "r", "r2"}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "r"}).is_integer(0));
  EXPECT_EQ(Run({"GET", "r2"}), "v");
  EXPECT_TRUE(IntIn(Run({"TTL", "r2"}), 99, 100));  // the TTL moves with the value
  // Over an existing key: replaced, and its TTL is the source's.
  Run({"SET", "dst", "old"});
  EXPECT_EQ(Run({"RENAME", "r2", "dst"}), "OK");
  EXPECT_EQ(Run({"GET", "dst"}), "v");
  EXPECT_TRUE(IntIn(Run({"TTL", "dst"}), 99, 100));
  // A key renamed onto itself stays.
  EXPECT_EQ(Run({"RENAME", "dst", "dst"}), "OK");
  EXPECT_EQ(Run({"GET", "dst"}), "v");
  EXPECT_TRUE(Run({"EXISTS", "r2"}).is_integer(0));
}

TEST_F(Strings, RenameNx) {
  EXPECT_EQ(Run({"RENAMENX", "missing", "x"}).error(), "ERR no such key");
  Run({"SET", "a", "1"});
  Run({"SET", "b", "2"});
  EXPECT_TRUE(Run({"RENAMENX", "a", "b"}).is_integer(0));
  EXPECT_EQ(Run({"GET", "a"}), "1");
  EXPECT_EQ(Run({"GET", "b"}), "2");
  EXPECT_TRUE(Run({"RENAMENX", "a", "c"}).is_integer(1));
  EXPECT_TRUE(Run({"EXISTS", "a"}).is_integer(0));
  EXPECT_EQ(Run({"GET", "c"}), "1");
  EXPECT_TRUE(Run({"RENAMENX", "c", "c"}).is_integer(0));
  EXPECT_EQ(Run({"GET", "c"}), "1");
}

// ---- The expire family ---------------------------------------------------------

TEST_F(Strings, TtlPttlPersistReplies) {
  EXPECT_TRUE(Run({"TTL", "missing"}).is_integer(-2));
  EXPECT_TRUE(Run({"PTTL", "missing"}).is_integer(-2));
  EXPECT_TRUE(Run({"PERSIST", "missing"}).is_integer(0));
  Run({"SET", "k", "v"});
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(-1));
  EXPECT_TRUE(Run({"PTTL", "k"}).is_integer(-1));
  EXPECT_TRUE(Run({"PERSIST", "k"}).is_integer(0));  // no TTL to remove
  EXPECT_TRUE(Run({"EXPIRE", "k", "100"}).is_integer(1));
  EXPECT_TRUE(IntIn(Run({"TTL", "k"}), 99, 100));
  EXPECT_TRUE(Run({"PERSIST", "k"}).is_integer(1));
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(-1));
  EXPECT_EQ(Run({"GET", "k"}), "v");
}

TEST_F(Strings, ExpireFamilySetsTheTime) {
  EXPECT_TRUE(Run({"EXPIRE", "missing", "10"}).is_integer(0));
  EXPECT_TRUE(Run({"PEXPIRE", "missing", "10000"}).is_integer(0));
  EXPECT_TRUE(Run({"EXPIREAT", "missing", kFarSec}).is_integer(0));
  EXPECT_TRUE(Run({"PEXPIREAT", "missing", kFarMs}).is_integer(0));
  EXPECT_TRUE(Run({"EXISTS", "missing"}).is_integer(0));
  Run({"SET", "k", "v"});
  EXPECT_TRUE(Run({"PEXPIRE", "k", "100000"}).is_integer(1));
  EXPECT_TRUE(IntIn(Run({"PTTL", "k"}), 99000, 100000));
  EXPECT_TRUE(IntIn(Run({"TTL", "k"}), 99, 100));
  EXPECT_TRUE(Run({"EXPIREAT", "k", kFarSec}).is_integer(1));
  EXPECT_TRUE(Run({"EXPIRETIME", "k"}).is_integer(4102444800));
  EXPECT_TRUE(Run({"PEXPIREAT", "k", kFarMs}).is_integer(1));
  EXPECT_TRUE(Run({"PEXPIRETIME", "k"}).is_integer(4102444800000));
  EXPECT_GT(Run({"TTL", "k"}).integer, 100000);
}

TEST_F(Strings, ExpireInThePastDeletes) {
  for (std::vector<std::string> cmd : {std::vector<std::string>{"EXPIRE", "m", "0"},
                                       {"EXPIRE", "m", "-10"},
                                       {"PEXPIRE", "m", "-1"},
                                       {"EXPIREAT", "m", "1"},
                                       {"PEXPIREAT", "m", "1"}}) {
    SCOPED_TRACE(cmd[0] + " " + cmd[2]);
    ASSERT_EQ(Run({"SET", "m", "v"}), "OK");
    EXPECT_TRUE(Run(cmd).is_integer(1));
    EXPECT_TRUE(Run({"EXISTS", "m"}).is_integer(0));
    EXPECT_TRUE(Run({"TTL", "m"}).is_integer(-2));
  }
}

TEST_F(Strings, ExpireNxXxGtLt) {
  Run({"SET", "n", "v"});
  // Without a TTL: XX and GT do nothing, LT sets one (no TTL is infinite).
  EXPECT_TRUE(Run({"EXPIRE", "n", "100", "XX"}).is_integer(0));
  EXPECT_TRUE(Run({"EXPIRE", "n", "100", "GT"}).is_integer(0));
  EXPECT_TRUE(Run({"TTL", "n"}).is_integer(-1));
  EXPECT_TRUE(Run({"EXPIRE", "n", "100", "LT"}).is_integer(1));
  EXPECT_TRUE(IntIn(Run({"TTL", "n"}), 99, 100));
  // With a TTL: NX does nothing, XX replaces it.
  EXPECT_TRUE(Run({"EXPIRE", "n", "50", "NX"}).is_integer(0));
  EXPECT_TRUE(Run({"EXPIRE", "n", "200", "XX"}).is_integer(1));
  EXPECT_TRUE(IntIn(Run({"TTL", "n"}), 199, 200));
  // GT only raises it, LT only lowers it.
  EXPECT_TRUE(Run({"EXPIRE", "n", "100", "GT"}).is_integer(0));
  EXPECT_TRUE(Run({"EXPIRE", "n", "300", "gt"}).is_integer(1));
  EXPECT_TRUE(IntIn(Run({"TTL", "n"}), 299, 300));
  EXPECT_TRUE(Run({"EXPIRE", "n", "400", "LT"}).is_integer(0));
  EXPECT_TRUE(Run({"EXPIRE", "n", "50", "LT"}).is_integer(1));
  EXPECT_TRUE(IntIn(Run({"TTL", "n"}), 49, 50));
  // NX on a key without a TTL sets one.
  Run({"SET", "m", "v"});
  EXPECT_TRUE(Run({"PEXPIRE", "m", "100000", "NX"}).is_integer(1));
  EXPECT_TRUE(IntIn(Run({"PTTL", "m"}), 99000, 100000));
  EXPECT_TRUE(Run({"EXPIREAT", "m", kFarSec, "GT"}).is_integer(1));
  EXPECT_TRUE(Run({"EXPIRETIME", "m"}).is_integer(4102444800));
  EXPECT_TRUE(Run({"PEXPIREAT", "m", "4102444700000", "LT"}).is_integer(1));
  EXPECT_TRUE(Run({"PEXPIRETIME", "m"}).is_integer(4102444700000));
}

TEST_F(Strings, ExpireErrors) {
  Run({"SET", "k", "v"});
  EXPECT_EQ(Run({"EXPIRE", "k", "abc"}).error(), kNotInt);
  EXPECT_EQ(Run({"EXPIRE", "k", "10", "BOGUS"}).error(), "ERR Unsupported option BOGUS");
  const std::string_view nx_with =
      "ERR NX and XX, GT or LT options at the same time are not compatible";
  EXPECT_EQ(Run({"EXPIRE", "k", "10", "NX", "XX"}).error(), nx_with);
  EXPECT_EQ(Run({"EXPIRE", "k", "10", "NX", "GT"}).error(), nx_with);
  EXPECT_EQ(Run({"PEXPIRE", "k", "10", "LT", "NX"}).error(), nx_with);
  EXPECT_EQ(Run({"EXPIRE", "k", "10", "GT", "LT"}).error(),
            "ERR GT and LT options at the same time are not compatible");
  EXPECT_EQ(Run({"EXPIRE", "k", "9223372036854775807"}).error(),
            "ERR invalid expire time in 'expire' command");
  EXPECT_EQ(Run({"EXPIRE", "k", "9223372036854775"}).error(),
            "ERR invalid expire time in 'expire' command");
  EXPECT_EQ(Run({"PEXPIRE", "k", "9223372036854775807"}).error(),
            "ERR invalid expire time in 'pexpire' command");
  EXPECT_EQ(Run({"EXPIREAT", "k", "9223372036854775807"}).error(),
            "ERR invalid expire time in 'expireat' command");
  EXPECT_EQ(Run({"EXPIRE", "k"}).error(), "ERR wrong number of arguments for 'expire' command");
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(-1));  // nothing changed
}

// ---- DBSIZE / KEYS / SCAN / RANDOMKEY / FLUSHALL -------------------------------

TEST_F(Strings, DbSizeCountsStringKeys) {
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(0));
  Run({"MSET", "a", "1", "b", "2", "c", "3"});
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(3));
  Run({"DEL", "b"});
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(2));
  Run({"SET", "a", "again"});
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(2));
}

TEST_F(Strings, KeysGlob) {
  Run({"MSET", "user:1", "a", "user:2", "b", "user:3", "c", "other", "x", "h?llo", "y", "hallo",
       "z"});
  EXPECT_EQ(Sorted(Run({"KEYS", "user:*"}).Strings()),
            (std::vector<std::string>{"user:1", "user:2", "user:3"}));
  EXPECT_EQ(Sorted(Run({"KEYS", "user:[12]"}).Strings()),
            (std::vector<std::string>{"user:1", "user:2"}));
  EXPECT_EQ(Sorted(Run({"KEYS", "h?llo"}).Strings()), (std::vector<std::string>{"h?llo", "hallo"}));
  EXPECT_EQ(Run({"KEYS", "h\\?llo"}).Strings(), (std::vector<std::string>{"h?llo"}));
  EXPECT_EQ(Run({"KEYS", "*"}).size(), 6u);
  RespValue none = Run({"KEYS", "nomatch*"});
  EXPECT_EQ(none.type, RespValue::Type::kArray);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(Run({"KEYS"}).error(), "ERR wrong number of arguments for 'keys' command");
}

TEST_F(Strings, ScanWalksToCursorZero) {
  std::set<std::string> want;
  for (int i = 0; i < 50; ++i) {
    Run({"SET", "scan:" + std::to_string(i), "v"});
    if (i % 2 == 0) want.insert("scan:" + std::to_string(i));
    Run({"SET", "other:" + std::to_string(i), "v"});
  }
  std::set<std::string> seen;
  std::string cursor = "0";
  int calls = 0;
  do {
    ASSERT_LT(++calls, 1000) << "SCAN never came back to cursor 0";
    RespValue r = Run({"SCAN", cursor, "MATCH", "scan:*[02468]", "COUNT", "7"});
    ASSERT_EQ(r.size(), 2u) << r.Debug();
    ASSERT_EQ(r[0].type, RespValue::Type::kBulk) << r.Debug();  // the cursor is a bulk string
    cursor = r[0].str;
    for (const std::string& k : r[1].Strings()) EXPECT_TRUE(seen.insert(k).second) << k;
  } while (cursor != "0");
  EXPECT_GT(calls, 1);
  EXPECT_EQ(seen, want);
}

TEST_F(Strings, ScanEmptyAndErrors) {
  RespValue r = Run({"SCAN", "0"});
  ASSERT_EQ(r.size(), 2u) << r.Debug();
  EXPECT_EQ(r[0], "0");
  EXPECT_EQ(r[1].type, RespValue::Type::kArray);
  EXPECT_EQ(r[1].size(), 0u);
  Run({"MSET", "a", "1", "b", "2"});
  RespValue all = Run({"SCAN", "0", "COUNT", "100", "TYPE", "string"});
  ASSERT_EQ(all.size(), 2u) << all.Debug();
  EXPECT_EQ(all[0], "0");
  EXPECT_EQ(Sorted(all[1].Strings()), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Run({"SCAN", "0", "COUNT", "0"}).error(), kSyntax);
  EXPECT_EQ(Run({"SCAN", "0", "COUNT", "abc"}).error(), kNotInt);
  EXPECT_EQ(Run({"SCAN", "0", "MATCH"}).error(), kSyntax);
  EXPECT_EQ(Run({"SCAN", "0", "BOGUS"}).error(), kSyntax);
  EXPECT_EQ(Run({"SCAN", "abc"}).error(), "ERR invalid cursor");
}

TEST_F(Strings, RandomKey) {
  EXPECT_TRUE(IsNull(Run({"RANDOMKEY"})));
  Run({"SET", "only", "v"});
  EXPECT_EQ(Run({"RANDOMKEY"}), "only");
  Run({"MSET", "a", "1", "b", "2"});
  for (int i = 0; i < 20; ++i) {
    RespValue r = Run({"RANDOMKEY"});
    ASSERT_EQ(r.type, RespValue::Type::kBulk) << r.Debug();
    EXPECT_TRUE(r == "only" || r == "a" || r == "b") << r.Debug();
  }
  Run({"DEL", "only", "a", "b"});
  EXPECT_TRUE(IsNull(Run({"RANDOMKEY"})));
}

TEST_F(Strings, FlushAll) {
  Run({"MSET", "a", "1", "b", "2"});
  Run({"SET", "t", "v", "EX", "100"});
  EXPECT_EQ(Run({"FLUSHALL"}), "OK");
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(0));
  EXPECT_TRUE(IsNull(Run({"GET", "a"})));
  EXPECT_TRUE(Run({"TTL", "t"}).is_integer(-2));
  EXPECT_EQ(Run({"KEYS", "*"}).size(), 0u);
  Run({"SET", "a", "1"});
  EXPECT_EQ(Run({"FLUSHALL", "SYNC"}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "a"}).is_integer(0));
  EXPECT_EQ(Run({"FLUSHALL", "BOGUS"}).error(), kSyntax);
  // The store works on after a flush.
  EXPECT_EQ(Run({"SET", "a", "2"}), "OK");
  EXPECT_EQ(Run({"GET", "a"}), "2");
}

}  // namespace
}  // namespace pion::server::testing
