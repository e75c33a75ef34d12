// The KV.PREFIX family in process: REGISTER / LOOKUP / DROP, BLOCKS and
// MEMBERSHIP, INFO, and SAVE / COMMIT without persistence.
#include <cstring>

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
            "ERR KV.PREFIX.REGISTER unknown option 'COLOR' (BLOCKS, PREFILL_MS)");
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "n"}), "MISS");
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(0));
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
  EXPECT_EQ(Run({"KV.PREFIX.SAVE"}).error(), "ERR persistence is not enabled");
  EXPECT_EQ(Run({"KV.PREFIX.COMMIT"}).error(), "ERR persistence is not enabled");
}

class KvPrefixDisabled : public CommandTest {};

TEST_F(KvPrefixDisabled, RefusedWithoutKvcache) {
  for (auto* name : {"KV.PREFIX.LOOKUP", "KV.PREFIX.DROP", "KV.PREFIX.BLOCKS"})
    EXPECT_EQ(Run({name, "ns"}).error(), "ERR V-store not enabled (use --kvcache)") << name;
}

}  // namespace
}  // namespace pion::server::testing
