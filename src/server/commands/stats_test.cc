// PION.STATS in process: the receipt's shape (RESP2 flat, RESP3 map), what a
// lookup credits, RESET.
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class StatsCommand : public KvTest {};

TEST_F(StatsCommand, ShapeInBothProtocols) {
  RespValue flat = Run({"PION.STATS"});
  ASSERT_EQ(flat.type, RespValue::Type::kArray);
  ASSERT_EQ(flat.size(), 32u);
  EXPECT_EQ(flat[0], "worker_id");
  EXPECT_TRUE(flat[1].is_integer(0));
  EXPECT_EQ(*flat.Find("prefill_seconds_avoided"), "0.000");
  Run({"HELLO", "3"});
  RespValue map = Run({"PION.STATS"});
  ASSERT_EQ(map.type, RespValue::Type::kMap);
  EXPECT_EQ(map.size(), 32u);  // 16 pairs
  EXPECT_EQ(map.Strings(), flat.Strings());
}

TEST_F(StatsCommand, LookupsAreCreditedAndResetZeroes) {
  Run({"KV.PREFIX.REGISTER", "a", "32", "fp16", "PREFILL_MS", "1200"});
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "a"}), "HIT");
  EXPECT_EQ(Run({"KV.PREFIX.LOOKUP", "b"}), "MISS");
  RespValue s = Run({"PION.STATS"});
  EXPECT_TRUE(s.Find("kvprefix_hits")->is_integer(1));
  EXPECT_TRUE(s.Find("kvprefix_misses")->is_integer(1));
  EXPECT_TRUE(s.Find("kvprefix_prefill_us_saved")->is_integer(1200000));
  EXPECT_EQ(*s.Find("prefill_seconds_avoided"), "1.200");
  EXPECT_EQ(Run({"PION.STATS", "RESET"}), "OK");
  s = Run({"PION.STATS"});
  EXPECT_TRUE(s.Find("kvprefix_hits")->is_integer(0));
  EXPECT_EQ(*s.Find("prefill_seconds_avoided"), "0.000");
  EXPECT_EQ(Run({"PION.STATS", "bogus"}).size(), 32u);  // other arguments are ignored
}

}  // namespace
}  // namespace pion::server::testing
