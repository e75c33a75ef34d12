// The KV.PREFIX family in process: REGISTER / LOOKUP / DROP, BLOCKS and
// MEMBERSHIP, INFO, SAVE / COMMIT without persistence, and lineage (PARENT,
// LOOKUP ... CHAIN, INFO <ns>, DROP of a subtree).
#include <cstring>

#include "kvproto/errors.h"
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

std::string U64s(std::initializer_list<uint64_t> v) {
  std::string s(v.size() * 8, '\0');
  size_t i = 0;
  for (uint64_t x : v) std::memcpy(&s[8 * i++], &x, 8);  // little-endian host
  return s;
}

class KvPrefixCommands : public KvTest {};

TEST_F(KvPrefixCommands, RegisterLookupDrop) {
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "app|p"}), "MISS");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "app|p", "1024", "fp16"}), "OK");
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "app|p"}), "HIT");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "app|p", "1024", "FP16"}), "OK");  // same shape
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "app|p", "512", "fp16"}).error(),
            "ERR namespace already registered with kv_dim 1024 vquant fp16");
  EXPECT_TRUE(Run({"KV.PREFIX.DROP", "app|p", "never", "app|p"}).is_integer(1));
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "app|p"}), "MISS");
  EXPECT_TRUE(Run({"KV.PREFIX.DROP", "app|p"}).is_integer(0));
}

TEST_F(KvPrefixCommands, RegisterValidationChangesNothing) {
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "", "64", "fp16"}).error(),
            "ERR ns_key length must be 1..512");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "n", "0", "fp16"}).error(),
            "ERR kv_dim out of range (1..16384)");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "n", "12a", "fp16"}).error(),
            "ERR value is not an integer or out of range");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "n", "64", "fp4"}).error(),
            "ERR KV.PREFIX.REGISTER: unknown vquant 'fp4' "
            "(want int8|turbo4|turbo3|turbo2|fp16|fp8|mlx4g32)");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "n", "48", "turbo4"}).error(),
            "ERR vquant turbo4 needs kv_dim divisible by 32");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "n", "64", "fp16", "COLOR", "1"}).error(),
            "ERR KV.PREFIX.REGISTER unknown option 'COLOR' (BLOCKS, PREFILL_MS, PARENT)");
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "n"}), "MISS");
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(0));
}

class KvLineage : public KvTest {
 protected:
  // Registers root <- t1 <- t2 with 100, 20 and 5 K-side layer-0 rows.
  void Chain() {
    ASSERT_EQ(Run({"KV.PREFIX.REGISTER", "root", "4", "fp16", "PREFILL_MS", "300"}), "OK");
    ASSERT_EQ(Run({"KV.PREFIX.REGISTER", "t1", "4", "fp16", "PARENT", "root", "PREFILL_MS", "40"}),
              "OK");
    ASSERT_EQ(Run({"KV.PREFIX.REGISTER", "t2", "4", "fp16", "PARENT", "t1"}), "OK");
    const std::pair<const char*, int> rows[] = {{"root_pk", 100}, {"t1_pk", 20}, {"t2_pk", 5}};
    for (auto [sid, n] : rows) {
      std::string blob(static_cast<size_t>(n) * 4 * 4, '\0');  // f32 zeros
      ASSERT_EQ(Run({"V.STOREBATCH", sid, "0", "0", std::to_string(n), blob}), "OK");
    }
  }
};

Config ShortChainConfig() {
  Config c = KvConfig();
  c.max_chain_length = 2;
  return c;
}

class KvShortChain : public CommandTest {
 protected:
  KvShortChain() : CommandTest(ShortChainConfig()) {}
};

TEST_F(KvShortChain, ChainTooLongIsRefused) {
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "a", "8", "fp16"}), "OK");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "b", "8", "fp16", "PARENT", "a"}), "OK");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "8", "fp16", "PARENT", "b"}).error(),
            "ERR PARENT chain too long (at most 2 namespaces: max-chain-length)");
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "c"}), "MISS");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "8", "fp16", "PARENT", "a"}), "OK");  // a sibling
}

TEST_F(KvLineage, RegisterParentErrorsChangeNothing) {
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "64", "fp16", "PARENT", "nope"}).error(),
            "ERR PARENT namespace is not registered");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "64", "fp16", "PARENT"}).error(),
            "ERR PARENT requires a namespace");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "64", "fp16", "PARENT", ""}).error(),
            "ERR ns_key length must be 1..512");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "p", "64", "fp16"}), "OK");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "64", "fp16", "PARENT", "p", "PARENT", "p"}).error(),
            "ERR KV.PREFIX.REGISTER option PARENT given twice");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "128", "fp16", "PARENT", "p"}).error(),
            "ERR PARENT namespace has kv_dim 64 (a chain keeps one kv_dim)");
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "c"}), "MISS");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "64", "int8", "PARENT", "p"}), "OK");  // any vquant
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "64", "int8", "PARENT", "p"}), "OK");  // same link
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "64", "int8"}), "OK");                 // keeps the link
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "d", "64", "fp16"}), "OK");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "c", "64", "int8", "PARENT", "d"}).error(),
            "ERR namespace already registered with PARENT 'p'");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "p", "64", "fp16", "PARENT", "c"}).error(),
            "ERR namespace already registered without a PARENT");
  RespValue info = Run({"KV.PREFIX.INFO", "c"});
  EXPECT_NE(info.str.find("parent:p\r\n"), std::string::npos) << info.str;
  EXPECT_NE(Run({"KV.PREFIX.INFO"}).str.find("linked_prefixes:1\r\n"), std::string::npos);
}

TEST_F(KvLineage, LookupChainRepliesRootToLeafAndCreditsOnce) {
  Chain();
  RespValue r = Run({"KV.PREFIX.LOOKUP", "t2", "CHAIN"});
  ASSERT_EQ(r.type, RespValue::Type::kArray) << r.Debug();
  ASSERT_EQ(r.size(), 3u);
  const char* names[] = {"root", "t1", "t2"};
  const int tokens[] = {100, 20, 5};
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(r[i].size(), 2u);
    EXPECT_EQ(r[i][0], names[i]);
    EXPECT_TRUE(r[i][1].is_integer(tokens[i])) << r[i][1].Debug();
  }
  // One hit for the whole chain: its tokens; t2 reported no prefill time, so
  // the time is the estimate (none measured).
  RespValue s = Run({"PION.STATS"});
  EXPECT_TRUE(s.Find("kvprefix_hits")->is_integer(1));
  EXPECT_TRUE(s.Find("kvprefix_tokens_served")->is_integer(125));
  EXPECT_TRUE(s.Find("kvprefix_hits_measured")->is_integer(0));
  // A chain whose every segment reported a time is credited their sum.
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "t1", "chain"}).size(), 2u);
  s = Run({"PION.STATS"});
  EXPECT_TRUE(s.Find("kvprefix_tokens_served")->is_integer(245));
  EXPECT_TRUE(s.Find("kvprefix_hits_measured")->is_integer(1));
  EXPECT_TRUE(s.Find("kvprefix_prefill_us_measured")->is_integer(340000)) << s.Debug();
  // Options combine with CHAIN in any order; TOKENS and PREFILL_MS replace the credit.
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "t2", "TOKENS", "7", "CHAIN", "PREFILL_MS", "9"}).size(), 3u);
  s = Run({"PION.STATS"});
  EXPECT_TRUE(s.Find("kvprefix_tokens_served")->is_integer(252));
  EXPECT_TRUE(s.Find("kvprefix_prefill_us_measured")->is_integer(349000));
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "nope", "CHAIN"}), "MISS");
  EXPECT_TRUE(Run({"PION.STATS"}).Find("kvprefix_misses")->is_integer(1));
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "t2", "CHAIN", "CHAIN"}).error(),
            "ERR KV.PREFIX.LOOKUP option CHAIN given twice");
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "t2", "CHAINS"}).error(),
            "ERR KV.PREFIX.LOOKUP unknown option (TOKENS, PREFILL_MS, CHAIN)");
  EXPECT_TRUE(Run({"PION.STATS"}).Find("kvprefix_hits")->is_integer(3));  // refusals record nothing
  // Without CHAIN a lookup is as before: the namespace's own tokens.
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "t2"}), "HIT");
}

TEST_F(KvLineage, InfoOfANamespaceReportsItsChain) {
  Chain();
  RespValue r = Run({"KV.PREFIX.INFO", "t2"});
  EXPECT_EQ(r.str,
            "namespace:t2\r\nparent:t1\r\nchildren:0\r\ndepth:2\r\nchain_length:3\r\n"
            "tokens:5\r\nchain_tokens:125\r\ntier:ram\r\n");
  r = Run({"KV.PREFIX.INFO", "root"});
  EXPECT_NE(r.str.find("parent:\r\nchildren:1\r\ndepth:0\r\nchain_length:1\r\n"), std::string::npos)
      << r.str;
  EXPECT_EQ(Run({"KV.PREFIX.INFO", "nope"}), "UNKNOWN");
  EXPECT_EQ(Run({"KV.PREFIX.INFO", "a", "b"}).error(), "ERR syntax error");
  EXPECT_NE(Run({"KV.PREFIX.INFO"}).str.find("linked_prefixes:2\r\n"), std::string::npos);
}

TEST_F(KvLineage, DropCountsTheWholeSubtree) {
  Chain();
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "t1b", "4", "fp16", "PARENT", "t1"}), "OK");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "other", "4", "fp16"}), "OK");
  EXPECT_TRUE(Run({"KV.PREFIX.DROP", "t1"}).is_integer(3));  // t1, t2, t1b
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "t2"}), "MISS");
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "root", "CHAIN"}).size(), 1u);
  EXPECT_TRUE(Run({"KV.PREFIX.DROP", "root", "other", "t2"}).is_integer(2));
  EXPECT_NE(Run({"KV.PREFIX.INFO"}).str.find("registered_prefixes:0\r\n"), std::string::npos);
}

// Names are any bytes: INFO <ns> escapes them, so its key:value lines hold.
TEST_F(KvPrefixCommands, InfoOfANamespaceEscapesNames) {
  const std::string odd("a\r\nb:\\c\x01\0", 9);  // CR, LF, ':', '\\', a control byte, NUL
  ASSERT_EQ(Run({"KV.PREFIX.REGISTER", odd, "4", "fp16"}), "OK");
  ASSERT_EQ(Run({"KV.PREFIX.REGISTER", "kid", "4", "fp16", "PARENT", odd}), "OK");
  const std::string esc = "a\\r\\nb:\\\\c\\x01\\x00";
  RespValue r = Run({"KV.PREFIX.INFO", "kid"});
  EXPECT_EQ(r.str, "namespace:kid\r\nparent:" + esc +
                       "\r\nchildren:0\r\ndepth:1\r\nchain_length:2\r\ntokens:0\r\nchain_tokens:"
                       "0\r\ntier:ram\r\n");
  r = Run({"KV.PREFIX.INFO", odd});
  EXPECT_EQ(r.str.rfind("namespace:" + esc + "\r\nparent:\r\nchildren:1\r\n", 0), 0u) << r.str;
  // Seven lines, each one key:value pair.
  size_t lines = 0;
  for (size_t pos = 0; pos < r.str.size(); ++lines) {
    size_t end = r.str.find("\r\n", pos);
    ASSERT_NE(end, std::string::npos);
    std::string line = r.str.substr(pos, end - pos);
    EXPECT_NE(line.find(':'), std::string::npos) << line;
    EXPECT_EQ(line.find_first_of("\r\n"), std::string::npos) << line;
    pos = end + 2;
  }
  EXPECT_EQ(lines, 8u);
}

// ACL over links: a tenant that may write root and t1 but only read t2.
class KvLineageAcl : public KvLineage {
 protected:
  // Client 1 is the default (unrestricted) user; client 0 becomes `rules`'s user.
  void Tenant(std::vector<std::string> rules) {
    SwitchClient(1);
    std::vector<std::string> cmd = {"ACL", "SETUSER", "ten", "on", ">pw", "+@all"};
    cmd.insert(cmd.end(), rules.begin(), rules.end());
    ASSERT_EQ(Run(cmd), "OK");
    SwitchClient(0);
    ASSERT_EQ(Run({"AUTH", "ten", "pw"}), "OK");
  }
};

TEST_F(KvLineageAcl, DropOfAParentNeedsWriteOnEveryDescendant) {
  Chain();  // root <- t1 <- t2
  Tenant({"~root", "~t1", "%R~t2"});
  const std::string_view noperm = kErrNoPermKey;
  EXPECT_EQ(Run({"KV.PREFIX.DROP", "root"}).error(), noperm);
  EXPECT_EQ(Run({"KV.PREFIX.DROP", "t1"}).error(), noperm);
  EXPECT_EQ(Run({"KV.PREFIX.DROP", "t2"}).error(), noperm);  // admission: a named key
  // Nothing was dropped, and the refusal is in ACL LOG under the descendant.
  for (const char* ns : {"root", "t1", "t2"}) EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", ns}), "HIT") << ns;
  SwitchClient(1);
  RespValue log = Run({"ACL", "LOG"});
  ASSERT_GE(log.size(), 1u) << log.Debug();
  const RespValue* object = log[0].Find("object");
  ASSERT_NE(object, nullptr) << log.Debug();
  EXPECT_EQ(object->str, "t2");
  // With write on the whole subtree the drop goes through.
  ASSERT_EQ(Run({"ACL", "SETUSER", "ten", "~t2"}), "OK");
  SwitchClient(0);
  EXPECT_TRUE(Run({"KV.PREFIX.DROP", "root"}).is_integer(3));
}

TEST_F(KvLineageAcl, LookupChainNeedsReadOnEveryAncestor) {
  Chain();
  Tenant({"~t1", "~t2"});  // not root
  const uint64_t hits = server().receipt().Read().hits;
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "t2", "CHAIN"}).error(), kErrNoPermKey);
  EXPECT_EQ(server().receipt().Read().hits, hits);    // a refused lookup credits nothing
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "t2"}), "HIT");  // the leaf alone names no ancestor
  SwitchClient(1);
  ASSERT_EQ(Run({"ACL", "SETUSER", "ten", "%R~root"}), "OK");
  SwitchClient(0);
  RespValue chain = Run({"KV.PREFIX.LOOKUP", "t2", "CHAIN"});
  ASSERT_EQ(chain.size(), 3u) << chain.Debug();
  EXPECT_EQ(chain[0][0], "root");
}

TEST_F(KvPrefixCommands, BlocksAndMembership) {
  EXPECT_EQ(Run({"KV.PREFIX.BLOCKS", "ns"}), "UNKNOWN");
  std::string table = U64s({11, 22, 33});
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "ns", "64", "fp16", "BLOCKS", "64", "3", table}), "OK");
  RespValue blocks = Run({"KV.PREFIX.BLOCKS", "ns"});
  ASSERT_EQ(blocks.str.size(), 8u + 3 * 8);
  uint32_t bs = 0, count = 0;
  std::memcpy(&bs, blocks.str.data(), 4);
  std::memcpy(&count, blocks.str.data() + 4, 4);
  EXPECT_EQ(bs, 64u);
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(blocks.str.substr(8), table);
  // A table of 3000 hashes (24 KiB): sent by reference to the stored table.
  std::string big(3000 * 8, '\0');
  for (size_t i = 0; i < 3000; ++i) {
    const uint64_t h = 1000 + 7 * i;
    std::memcpy(&big[8 * i], &h, 8);
  }
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "big", "64", "fp16", "BLOCKS", "32", "3000", big}), "OK");
  RespValue big_blocks = Run({"KV.PREFIX.BLOCKS", "big"});
  ASSERT_EQ(big_blocks.str.size(), 8u + big.size());
  std::memcpy(&bs, big_blocks.str.data(), 4);
  std::memcpy(&count, big_blocks.str.data() + 4, 4);
  EXPECT_EQ(bs, 32u);
  EXPECT_EQ(count, 3000u);
  EXPECT_EQ(big_blocks.str.substr(8), big);
  // Probe 33, 5, 11: bits 0 and 2 set (little-endian bit order).
  RespValue bits = Run({"KV.PREFIX.MEMBERSHIP", "ns", "3", U64s({33, 5, 11})});
  ASSERT_EQ(bits.str.size(), 1u);
  EXPECT_EQ(static_cast<uint8_t>(bits.str[0]), 0b101);
  EXPECT_EQ(Run({"KV.PREFIX.MEMBERSHIP", "ns", "2", U64s({1})}).error(),
            "ERR hash_blob length mismatch");
  EXPECT_EQ(Run({"KV.PREFIX.MEMBERSHIP", "ns", "-1", ""}).error(),
            "ERR hash_count out of range (0..1048576)");
  EXPECT_EQ(Run({"KV.PREFIX.MEMBERSHIP", "other", "1", U64s({1})}), "UNKNOWN");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "ns", "64", "fp16", "BLOCKS", "64", "2", table}).error(),
            "ERR BLOCKS hash_blob length mismatch");
}

TEST_F(KvPrefixCommands, InfoCountsNamespaces) {
  Run({"KV.PREFIX.REGISTER", "a", "32", "int8"});
  RespValue r = Run({"KV.PREFIX.INFO"});
  ASSERT_EQ(r.type, RespValue::Type::kBulk);
  EXPECT_NE(r.str.find("registered_prefixes:1\r\n"), std::string::npos) << r.str;
  EXPECT_NE(r.str.find("vstore_sessions:2\r\n"), std::string::npos) << r.str;
  EXPECT_NE(r.str.find("wal_enabled:0\r\n"), std::string::npos) << r.str;
}

TEST_F(KvPrefixCommands, SaveAndCommitNeedPersistence) {
  EXPECT_EQ(Run({"KV.PREFIX.SAVE"}).error(), "NOPERSIST persistence is not enabled");
  EXPECT_EQ(Run({"KV.PREFIX.COMMIT"}).error(), "NOPERSIST persistence is not enabled");
}

class KvPrefixDisabled : public CommandTest {};

TEST_F(KvPrefixDisabled, RefusedWithoutKvcache) {
  for (auto* name : {"KV.PREFIX.LOOKUP", "KV.PREFIX.DROP", "KV.PREFIX.BLOCKS"})
    EXPECT_EQ(Run({name, "ns"}).error(), "NOKVCACHE V-store not enabled (use --kvcache)") << name;
}

}  // namespace
}  // namespace pion::server::testing
