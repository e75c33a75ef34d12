// The KV.BLOCK family in process: MATCH (count, BITMAP, PIN, errors, ACL),
// UNPIN (never an error, per user), pins against expiry, eviction and -OOM,
// max-block-leases, INFO's pin lines, and CHAIN (links, eviction leaves
// first, ancestor stamps, DEL/RENAME/SET of a chained key, errors).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvproto/errors.h"
#include "server/commands/testing/command_fixture.h"
#include "store/block_ops.h"
#include "store/store.h"

namespace pion::server::testing {
namespace {

std::string U64s(std::initializer_list<uint64_t> v) {
  std::string s(v.size() * 8, '\0');
  size_t i = 0;
  for (uint64_t x : v) std::memcpy(&s[8 * i++], &x, 8);  // little-endian host
  return s;
}

// Waits (bounded) until the wall clock has moved `ms` milliseconds on.
void WaitMs(int ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
}

std::string InfoLine(const RespValue& info, std::string_view field) {
  std::string_view s = info.str;
  std::string key = std::string(field) + ":";
  size_t at = s.find("\r\n" + key);
  if (at == std::string_view::npos) return "";
  at += 2 + key.size();
  return std::string(s.substr(at, s.find("\r\n", at) - at));
}

class KvBlockMatch : public KvTest {
 protected:
  void SetKeys(std::initializer_list<const char*> keys) {
    for (const char* k : keys) ASSERT_EQ(Run({"SET", k, "v"}), "OK");
  }
};

TEST_F(KvBlockMatch, LeadingRunAndBitmap) {
  SetKeys({"a", "b", "d"});
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "4", "a", "b", "c", "d"}).is_integer(2));
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "1", "c"}).is_integer(0));
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "2", "a", "a"}).is_integer(2));
  RespValue bm = Run({"KV.BLOCK.MATCH", "4", "a", "b", "c", "d", "BITMAP"});
  EXPECT_EQ(bm, std::string("\x0b", 1));  // bits 0, 1, 3
  // Nine keys: two bytes, LSB first.
  SetKeys({"k8"});
  bm = Run({"KV.BLOCK.MATCH", "9", "x", "x", "x", "x", "x", "x", "x", "x", "k8", "bitmap"});
  EXPECT_EQ(bm, std::string("\x00\x01", 2));
  // A namespace (or its sid) is not a string key: missing.
  ASSERT_EQ(Run({"KV.PREFIX.REGISTER", "ns", "32", "fp16"}), "OK");
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "3", "a", "ns", "b"}).is_integer(1));
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "2", "ns_pk", "a", "BITMAP"}), std::string("\x02", 1));
}

TEST_F(KvBlockMatch, ErrorsInOrder) {
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "0", "a"}).error(), "ERR numkeys should be greater than 0");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "x", "a"}).error(), "ERR numkeys should be greater than 0");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "-3", "a"}).error(), "ERR numkeys should be greater than 0");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1048577", "a"}).error(),
            "ERR numkeys out of range (1..1048576)");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "3", "a", "b"}).error(),
            "ERR Number of keys can't be greater than number of args");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1", "a", "FOO"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1", "a", "BITMAP", "BITMAP"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1", "a", "PIN"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "5", "PIN", "5"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "0"}).error(),
            "ERR PIN out of range (1..600000)");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "600001"}).error(),
            "ERR PIN out of range (1..600000)");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "x"}).error(),
            "ERR PIN out of range (1..600000)");
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1"}).error(),
            "ERR wrong number of arguments for 'kv.block.match' command");
}

TEST_F(KvBlockMatch, ExpiredCountsAsMissingAndIsRemoved) {
  ASSERT_EQ(Run({"SET", "a", "v"}), "OK");
  ASSERT_EQ(Run({"SET", "b", "v", "PX", "5"}), "OK");
  ASSERT_EQ(Run({"SET", "c", "v"}), "OK");
  WaitMs(10);
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "3", "a", "b", "c"}).is_integer(1));
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(2));  // b was removed, as GET removes it
}

TEST_F(KvBlockMatch, MatchStampsTheKeysItCounts) {
  SetKeys({"a", "b", "c"});
  store::Store::BlockInfo ia, ib, ic;
  Run({"KV.BLOCK.MATCH", "2", "b", "c"});
  auto* st = server().store();
  ASSERT_TRUE(store::OpDescribeBlock({*st}, "a", &ia) && store::OpDescribeBlock({*st}, "b", &ib) &&
              store::OpDescribeBlock({*st}, "c", &ic));
  EXPECT_EQ(ib.stamp, ic.stamp);  // one stamp for the run
  EXPECT_GT(ib.stamp, ia.stamp);
}

TEST_F(KvBlockMatch, PinReplyLeaseAndUnpin) {
  SetKeys({"a", "b"});
  RespValue r = Run({"KV.BLOCK.MATCH", "3", "a", "b", "c", "PIN", "60000"});
  ASSERT_EQ(r.elems.size(), 2u) << r.Debug();
  EXPECT_TRUE(r.elems[0].is_integer(2));
  const int64_t lease = r.elems[1].integer;
  EXPECT_GT(lease, 0);
  RespValue info = Run({"INFO", "pion"});
  EXPECT_EQ(InfoLine(info, "pinned_keys"), "2");
  EXPECT_EQ(InfoLine(info, "leases"), "1");
  EXPECT_NE(InfoLine(info, "pinned_bytes"), "0");
  // Nothing counted: no lease, nothing against the cap.
  r = Run({"KV.BLOCK.MATCH", "1", "zz", "PIN", "100"});
  EXPECT_TRUE(r.elems[0].is_integer(0));
  EXPECT_TRUE(r.elems[1].is_integer(0));
  r = Run({"KV.BLOCK.MATCH", "2", "zz", "b", "BITMAP", "PIN", "100"});
  EXPECT_EQ(r.elems[0], std::string("\x02", 1));
  const int64_t lease2 = r.elems[1].integer;
  EXPECT_GT(lease2, lease);
  // UNPIN: never an error; unknown and repeated leases count 0.
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(lease), "999999", "junk", "-1"}).is_integer(1));
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(lease)}).is_integer(0));
  info = Run({"INFO", "pion"});
  EXPECT_EQ(InfoLine(info, "pinned_keys"), "1");  // b, by lease2
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(lease2)}).is_integer(1));
  info = Run({"INFO", "pion"});
  EXPECT_EQ(InfoLine(info, "pinned_keys"), "0");
  EXPECT_EQ(InfoLine(info, "pinned_bytes"), "0");
  EXPECT_EQ(InfoLine(info, "leases"), "0");
}

TEST_F(KvBlockMatch, LeaseEndsAtItsDeadline) {
  SetKeys({"a"});
  RespValue r = Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "5"});
  ASSERT_GT(r.elems[1].integer, 0);
  WaitMs(10);
  // The next pin (or the expiry cycle) ends it; UNPIN of a due lease counts 0.
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(r.elems[1].integer)}).is_integer(0));
  EXPECT_EQ(InfoLine(Run({"INFO", "pion"}), "leases"), "0");
}

TEST_F(KvBlockMatch, PinnedKeyOutlivesItsTtlUntilUnpinned) {
  ASSERT_EQ(Run({"SET", "k", "v", "PX", "20"}), "OK");
  RespValue r = Run({"KV.BLOCK.MATCH", "1", "k", "PIN", "60000"});
  ASSERT_GT(r.elems[1].integer, 0);
  WaitMs(30);
  EXPECT_EQ(Run({"GET", "k"}), "v");
  EXPECT_TRUE(Run({"PTTL", "k"}).is_integer(0));
  EXPECT_TRUE(Run({"TTL", "k"}).is_integer(0));
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "1", "k"}).is_integer(1));
  EXPECT_TRUE(Run({"EXISTS", "k"}).is_integer(1));
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(r.elems[1].integer)}).is_integer(1));
  EXPECT_TRUE(Run({"EXISTS", "k"}).is_integer(0));  // expired when its last pin ended
  EXPECT_EQ(Run({"GET", "k"}).type, RespValue::Type::kNull);
}

TEST_F(KvBlockMatch, DelOfAPinnedKeyActsAtOnceAndTheLeaseLivesOn) {
  SetKeys({"a", "b"});
  RespValue r = Run({"KV.BLOCK.MATCH", "2", "a", "b", "PIN", "60000"});
  EXPECT_TRUE(Run({"DEL", "a"}).is_integer(1));
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "2", "a", "b"}).is_integer(0));
  RespValue info = Run({"INFO", "pion"});
  EXPECT_EQ(InfoLine(info, "pinned_keys"), "1");
  EXPECT_EQ(InfoLine(info, "leases"), "1");
  ASSERT_EQ(Run({"SET", "a", "new"}), "OK");  // a new key: not pinned
  EXPECT_EQ(InfoLine(Run({"INFO", "pion"}), "pinned_keys"), "1");
  EXPECT_EQ(Run({"RENAME", "b", "c"}), "OK");
  EXPECT_EQ(InfoLine(Run({"INFO", "pion"}), "pinned_keys"), "0");
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(r.elems[1].integer)}).is_integer(1));
  // FLUSHALL ends every pin at once; the lease still counts until released.
  r = Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "60000"});
  EXPECT_EQ(Run({"FLUSHALL"}), "OK");
  info = Run({"INFO", "pion"});
  EXPECT_EQ(InfoLine(info, "pinned_keys"), "0");
  EXPECT_EQ(InfoLine(info, "leases"), "1");
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(r.elems[1].integer)}).is_integer(1));
}

TEST_F(KvBlockMatch, PinnedKeysAreNotEvictedAndAllPinnedIsOom) {
  // Each key is charged about 1,058 bytes (value capacity, key, entry).
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "6000"}), "OK");
  const std::string v(900, 'x');
  for (const char* k : {"p1", "p2", "p3"}) ASSERT_EQ(Run({"SET", k, v}), "OK");
  RespValue r = Run({"KV.BLOCK.MATCH", "3", "p1", "p2", "p3", "PIN", "60000"});
  ASSERT_TRUE(r.elems[0].is_integer(3));
  // Writes evict what is not pinned ...
  for (int i = 0; i < 20; ++i) ASSERT_EQ(Run({"SET", "f" + std::to_string(i), v}), "OK");
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "3", "p1", "p2", "p3"}).is_integer(3));
  // ... and when only pinned bytes are left, a write that needs room is -OOM.
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "3500"}), "OK");
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "3", "p1", "p2", "p3"}).is_integer(3));
  EXPECT_EQ(Run({"SET", "big", v}).error().substr(0, 4), "OOM ");
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(r.elems[1].integer)}).is_integer(1));
  EXPECT_EQ(Run({"SET", "big", v}), "OK");
}

TEST_F(KvBlockMatch, MaxBlockLeases) {
  SetKeys({"a"});
  ASSERT_EQ(Run({"CONFIG", "SET", "max-block-leases", "2"}), "OK");
  EXPECT_EQ(Run({"CONFIG", "GET", "max-block-leases"}).Strings(),
            (std::vector<std::string>{"max-block-leases", "2"}));
  RespValue l1 = Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "60000"});
  RespValue l2 = Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "60000"});
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "60000"}).error(),
            "ERR too many block leases (max-block-leases)");
  // A MATCH that would pin nothing is not refused (and takes no lease).
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "1", "a"}).is_integer(1));
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(l1.elems[1].integer)}).is_integer(1));
  EXPECT_GT(Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "60000"}).elems[1].integer, 0);
  (void)l2;
}

TEST_F(KvBlockMatch, UnpinCountsOnlyTheSameUsersLeases) {
  SetKeys({"a"});
  ASSERT_EQ(Run({"ACL", "SETUSER", "other", "on", "nopass", "~*", "+@all"}), "OK");
  RespValue r = Run({"KV.BLOCK.MATCH", "1", "a", "PIN", "60000"});
  SwitchClient(1);
  ASSERT_EQ(Run({"AUTH", "other", "x"}), "OK");
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(r.elems[1].integer)}).is_integer(0));
  SwitchClient(0);
  EXPECT_TRUE(Run({"KV.BLOCK.UNPIN", std::to_string(r.elems[1].integer)}).is_integer(1));
}

TEST_F(KvBlockMatch, AclDeniedKeyIsNoPermWithoutAnExistenceHint) {
  SetKeys({"pub:a", "sec:a"});
  ASSERT_EQ(Run({"ACL", "SETUSER", "t", "on", "nopass", "%R~pub:*", "+@all"}), "OK");
  SwitchClient(1);
  ASSERT_EQ(Run({"AUTH", "t", "x"}), "OK");
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "1", "pub:a"}).is_integer(1));
  // The same answer whether the denied key exists or not.
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "2", "pub:a", "sec:a"}).error(), kErrNoPermKey);
  EXPECT_EQ(Run({"KV.BLOCK.MATCH", "2", "pub:a", "sec:none"}).error(), kErrNoPermKey);
  // Options after the keys are not keys.
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "1", "pub:a", "BITMAP"}).type == RespValue::Type::kBulk);
  EXPECT_EQ(Run({"COMMAND", "GETKEYS", "KV.BLOCK.MATCH", "2", "x", "y", "PIN", "5"}).Strings(),
            (std::vector<std::string>{"x", "y"}));
}

class KvBlockChain : public KvTest {
 protected:
  store::Store::BlockInfo Info(std::string_view k) {
    store::Store::BlockInfo i;
    EXPECT_TRUE(store::OpDescribeBlock({*server().store()}, k, &i)) << k;
    return i;
  }
};

TEST_F(KvBlockChain, LinksHashesTokens) {
  ASSERT_EQ(Run({"SET", "root", "r"}), "OK");
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "AFTER", "root", "HASHES", U64s({7, 8}), "TOKENS", "16", "b1",
                 "v1", "b2", "v2"}),
            "OK");
  EXPECT_EQ(Run({"GET", "b2"}), "v2");
  EXPECT_EQ(Info("b1").parent, "root");
  EXPECT_EQ(Info("b2").parent, "b1");
  EXPECT_EQ(Info("root").children, 1u);
  EXPECT_TRUE(Info("b2").has_hash);
  EXPECT_EQ(Info("b2").hash, 8u);
  EXPECT_EQ(Info("b1").tokens, 16u);
  // AFTER a missing key: the first key is a root.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "AFTER", "nope", "c1", "x"}), "OK");
  EXPECT_EQ(Info("c1").parent, "");
  // A value may look like a keyword.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "d1", "AFTER", "d2", "TOKENS"}), "OK");
  EXPECT_EQ(Run({"GET", "d1"}), "AFTER");
  EXPECT_EQ(Info("d2").parent, "d1");
  // EX applies to every key.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "EX", "100", "e1", "x", "e2", "y"}), "OK");
  EXPECT_TRUE(Run({"TTL", "e2"}).is_integer(100));
  EXPECT_EQ(Run({"TYPE", "e1"}), "string");
}

TEST_F(KvBlockChain, ErrorsStoreNothing) {
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "a", "1", "b"}).error(),
            "ERR wrong number of arguments for 'kv.block.chain' command");
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "TOKENS", "5"}).error(),
            "ERR wrong number of arguments for 'kv.block.chain' command");
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "TOKENS", "5", "TOKENS", "6", "a", "1"}).error(),
            "ERR syntax error");
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "EX", "5", "PX", "6", "a", "1"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "EX", "0", "a", "1"}).error(),
            "ERR invalid expire time in 'kv.block.chain' command");
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "PX", "x", "a", "1"}).error(),
            "ERR value is not an integer or out of range");
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "TOKENS", "0", "a", "1"}).error(),
            "ERR TOKENS out of range (1..65536)");
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "TOKENS", "65537", "a", "1"}).error(),
            "ERR TOKENS out of range (1..65536)");
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "HASHES", U64s({1}), "a", "1", "b", "2"}).error(),
            "ERR HASHES must hold 8 bytes (a little-endian u64) per key");
  ASSERT_EQ(Run({"KV.PREFIX.REGISTER", "ns", "32", "fp16"}), "OK");
  EXPECT_EQ(Run({"KV.BLOCK.CHAIN", "a", "1", "ns", "2"}).error(),
            "WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(1));
}

TEST_F(KvBlockChain, DelMakesChildrenRootsAndSetKeepsLinks) {
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "a", "1", "b", "2", "c", "3"}), "OK");
  ASSERT_EQ(Run({"SET", "b", "new"}), "OK");
  EXPECT_EQ(Info("b").parent, "a");
  EXPECT_EQ(Info("c").parent, "b");
  EXPECT_TRUE(Run({"DEL", "b"}).is_integer(1));
  EXPECT_EQ(Info("c").parent, "");
  EXPECT_EQ(Info("a").children, 0u);
  // RENAME moves the links.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "AFTER", "a", "x", "1", "y", "2"}), "OK");
  ASSERT_EQ(Run({"RENAME", "x", "x2"}), "OK");
  EXPECT_EQ(Info("x2").parent, "a");
  EXPECT_EQ(Info("y").parent, "x2");
  EXPECT_EQ(Info("a").children, 1u);
  // A chain that names a key twice never makes a cycle.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "p", "1", "q", "2", "p", "3"}), "OK");
  EXPECT_EQ(Info("q").parent, "p");
  EXPECT_EQ(Info("p").parent, "");
  // Its own AFTER key: the link is not made, the key is a root.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "AFTER", "q", "q", "4"}), "OK");
  EXPECT_EQ(Info("q").parent, "");
  EXPECT_EQ(Info("p").children, 0u);
}

TEST_F(KvBlockChain, TouchStampsAncestors) {
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "a", "1", "b", "2", "c", "3"}), "OK");
  ASSERT_EQ(Run({"SET", "other", "x"}), "OK");
  EXPECT_GT(Info("other").stamp, Info("a").stamp);
  EXPECT_EQ(Run({"GET", "c"}), "3");
  EXPECT_GT(Info("a").stamp, Info("other").stamp);
  EXPECT_EQ(Info("a").stamp, Info("c").stamp);
  ASSERT_EQ(Run({"SET", "other", "y"}), "OK");
  EXPECT_TRUE(Run({"KV.BLOCK.MATCH", "1", "b"}).is_integer(1));
  EXPECT_EQ(Info("a").stamp, Info("b").stamp);
  EXPECT_GT(Info("a").stamp, Info("other").stamp);
  // Deleting the leaf later does not make the chain older.
  const uint64_t s = Info("a").stamp;
  EXPECT_TRUE(Run({"DEL", "c"}).is_integer(1));
  EXPECT_EQ(Info("a").stamp, s);
}

TEST_F(KvBlockChain, EvictionTakesLeavesFirst) {
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "6000"}), "OK");
  const std::string v(900, 'x');
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "r", v, "m", v, "l", v}), "OK");
  // Newer plain keys push the chain out: leaf first, the root last.
  ASSERT_EQ(Run({"SET", "n1", v}), "OK");
  ASSERT_EQ(Run({"SET", "n2", v}), "OK");
  ASSERT_EQ(Run({"SET", "n3", v}), "OK");
  ASSERT_EQ(Run({"SET", "n4", v}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "r"}).is_integer(1));
  EXPECT_TRUE(Run({"EXISTS", "l"}).is_integer(0));
}

// OpBlockMatch (slots a chunk at a time, the ancestor walk skipped after the key
// before) against OpBlockMatchSimple (one key at a time): the same count, bitmap
// and keys stamped, for lists longer than a chunk of plain keys, chained keys
// (forks, a parent outside the list), missing, expired and repeated keys.
TEST_F(KvBlockMatch, FastPathAgreesWithTheSimpleOne) {
  std::vector<std::string> all;
  for (int i = 0; i < 120; ++i) {
    all.push_back("p" + std::to_string(i) + std::string(60, 'x'));
    ASSERT_EQ(Run({"SET", all.back(), "v"}), "OK");
  }
  std::vector<std::string> chain_args = {"KV.BLOCK.CHAIN"};
  for (int i = 0; i < 100; ++i) {
    all.push_back("c" + std::to_string(i));
    chain_args.push_back(all.back());
    chain_args.push_back("v");
  }
  ASSERT_EQ(Run(chain_args), "OK");
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "AFTER", "c40", "f0", "v", "f1", "v"}), "OK");
  all.push_back("f0");
  all.push_back("f1");
  for (int i = 0; i < 6; ++i) {
    all.push_back("gone" + std::to_string(i));
    ASSERT_EQ(Run({"SET", all.back(), "v", "PX", "1"}), "OK");
  }
  for (int i = 0; i < 20; ++i) all.push_back("missing" + std::to_string(i));
  WaitMs(3);
  store::Store* st = server().store();
  // The keys holding the newest stamp after a call: those it stamped.
  auto stamped = [&] {
    uint64_t top = 0;
    std::vector<std::string> out;
    for (const std::string& k : all) {
      store::Store::BlockInfo b;
      if (store::OpDescribeBlock({*st}, k, &b) && b.stamp >= top) {
        if (b.stamp > top) out.clear();
        top = b.stamp;
        out.push_back(k);
      }
    }
    return out;
  };
  uint32_t x = 99;
  auto pick = [&](size_t lo, size_t hi) {
    x = x * 1103515245u + 12345u;
    return lo + (x >> 8) % (hi - lo);
  };
  for (int round = 0; round < 60; ++round) {
    std::vector<std::string_view> keys;
    const size_t n = 1 + pick(0, 200);
    const bool runs = round % 3 != 0;  // mostly leading runs of one kind, then a miss
    for (size_t i = 0; i < n; ++i) {
      if (runs && i < n - 3)
        keys.push_back(all[round % 2 == 0 ? pick(0, 120) : 120 + (i % 100)]);
      else
        keys.push_back(all[pick(0, all.size())]);
    }
    for (bool bitmap : {false, true}) {
      std::string fast_bits(bitmap ? (n + 7) / 8 : 0, '\0'), simple_bits = fast_bits;
      auto* fb = bitmap ? reinterpret_cast<uint8_t*>(fast_bits.data()) : nullptr;
      auto* sb = bitmap ? reinterpret_cast<uint8_t*>(simple_bits.data()) : nullptr;
      store::BlockMatchResult f = store::OpBlockMatch({*st}, keys, fb, 0, "default");
      std::vector<std::string> fast_stamped = stamped();
      store::BlockMatchResult s = store::OpBlockMatchSimple({*st}, keys, sb, 0, "default");
      EXPECT_EQ(f.count, s.count) << round;
      EXPECT_EQ(fast_bits, simple_bits) << round;
      if (f.count > 0) {
        EXPECT_EQ(fast_stamped, stamped()) << round;
      }
    }
  }
  // With PIN (the path under mu_ alone): the same count and pins.
  std::vector<std::string_view> keys = {all[0], all[125], all[126], all[1], "missing0", all[2]};
  store::BlockMatchResult f = store::OpBlockMatch({*st}, keys, nullptr, 1000, "default");
  store::BlockMatchResult s = store::OpBlockMatchSimple({*st}, keys, nullptr, 1000, "default");
  EXPECT_EQ(f.count, 4u);
  EXPECT_EQ(s.count, 4u);
  EXPECT_NE(f.lease, 0u);
  EXPECT_NE(s.lease, 0u);
  EXPECT_EQ(st->PinStatsNow().keys, 4u);
}

// What the store reports for hashed block keys (server/kv_events.cc turns it
// into BlockStored / BlockRemoved).
struct KeyEvents final : store::BlockTableObserver {
  struct Stored {
    std::vector<uint64_t> hashes;
    std::optional<uint64_t> parent;
    uint32_t tokens;
    bool operator==(const Stored&) const = default;
  };
  std::vector<Stored> stored;
  std::vector<uint64_t> removed;
  int cleared = 0;
  void OnBlocksStored(const store::BlockTable&, std::optional<uint64_t>) override {}
  void OnBlocksRemoved(const store::BlockTable&) override {}
  void OnAllBlocksCleared() override { ++cleared; }
  void OnBlockKeysStored(std::span<const uint64_t> h, std::optional<uint64_t> parent,
                         uint32_t tokens) override {
    stored.push_back({{h.begin(), h.end()}, parent, tokens});
  }
  void OnBlockKeyRemoved(uint64_t hash) override { removed.push_back(hash); }
};

TEST_F(KvBlockChain, HashedKeysAreReportedStoredAndRemoved) {
  KeyEvents ev;
  server().store()->SetBlockTableObserver(&ev);
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "HASHES", U64s({1, 2}), "TOKENS", "16", "a", "x", "b", "y"}),
            "OK");
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "AFTER", "b", "HASHES", U64s({3}), "c", "z"}), "OK");
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "AFTER", "c", "d", "w"}), "OK");  // no hash: no report
  using S = KeyEvents::Stored;
  EXPECT_EQ(ev.stored, (std::vector<S>{{{1, 2}, std::nullopt, 16}, {{3}, 2, 0}}));
  // RENAME keeps the hash (nothing); DEL of the renamed key removes it.
  ASSERT_EQ(Run({"RENAME", "a", "a2"}), "OK");
  EXPECT_TRUE(ev.removed.empty());
  // SET and APPEND over a block keep its links and hash (as the WAL and snapshot
  // keep them): nothing is removed.
  ASSERT_EQ(Run({"SET", "b", "new"}), "OK");
  EXPECT_TRUE(ev.removed.empty());
  EXPECT_TRUE(Info("b").has_hash);
  EXPECT_EQ(Info("c").parent, "b");
  ASSERT_TRUE(Run({"APPEND", "c", "more"}).is_integer(5));
  EXPECT_TRUE(ev.removed.empty());
  EXPECT_TRUE(Run({"DEL", "a2", "d"}).is_integer(2));
  EXPECT_EQ(ev.removed, (std::vector<uint64_t>{1}));
  // A CHAIN over a hashed key: the old hash goes first.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "HASHES", U64s({5}), "e", "x"}), "OK");
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "HASHES", U64s({6}), "e", "y"}), "OK");
  EXPECT_EQ(ev.removed.back(), 5u);
  EXPECT_EQ(ev.stored.back(), (S{{6}, std::nullopt, 0}));
  // Expiry: a key read after its time.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "PX", "1", "HASHES", U64s({7}), "t", "x"}), "OK");
  WaitMs(3);
  EXPECT_EQ(Run({"GET", "t"}).type, RespValue::Type::kNull);
  EXPECT_EQ(ev.removed.back(), 7u);
  // What start-up announces: runs of hashed keys, forks start their own.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "HASHES", U64s({10, 11}), "TOKENS", "4", "r0", "x", "r1", "y"}),
            "OK");
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "AFTER", "r0", "HASHES", U64s({12}), "f0", "x"}), "OK");
  std::vector<S> runs;
  for (const store::ResidentBlockRun& r : server().store()->ResidentBlockKeys())
    runs.push_back({r.hashes, r.parent_hash, r.tokens});
  std::sort(runs.begin(), runs.end(), [](const S& x, const S& y) { return x.hashes < y.hashes; });
  EXPECT_EQ(runs, (std::vector<S>{{{2, 3}, std::nullopt, 16},  // b and c kept their hashes
                                  {{6}, std::nullopt, 0},
                                  {{10}, std::nullopt, 4},
                                  {{11}, 10, 4},
                                  {{12}, 10, 0}}));
  ASSERT_EQ(Run({"FLUSHALL"}), "OK");
  EXPECT_EQ(ev.cleared, 1);
  server().store()->SetBlockTableObserver(nullptr);
}

}  // namespace
}  // namespace pion::server::testing
