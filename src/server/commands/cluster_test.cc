// CLUSTER, READONLY, READWRITE in process: refused without --cluster-emulated (Redis's
// text), a one-node cluster owning every slot with it.
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

Config Emulated() {
  Config c = KvConfig();
  c.cluster_emulated = true;
  return c;
}

class ClusterOff : public CommandTest {};
class ClusterOn : public CommandTest {
 protected:
  ClusterOn() : CommandTest(Emulated()) {}
};

TEST_F(ClusterOff, RefusedAsByANonClusterRedis) {
  const std::vector<std::vector<std::string>> cmds = {
      {"CLUSTER", "SLOTS"}, {"CLUSTER", "KEYSLOT", "x"}, {"READONLY"}, {"READWRITE"}};
  for (const auto& cmd : cmds)
    EXPECT_EQ(Run(cmd).error(), "ERR This instance has cluster support disabled");
  EXPECT_EQ(Run({"CLUSTER", "HELP"}).type, RespValue::Type::kArray);
}

TEST_F(ClusterOn, OneNodeOwnsEverySlot) {
  RespValue slots = Run({"CLUSTER", "SLOTS"});
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_TRUE(slots[0][0].is_integer(0));
  EXPECT_TRUE(slots[0][1].is_integer(16383));
  RespValue id = Run({"CLUSTER", "MYID"});
  EXPECT_EQ(id.str.size(), 40u);
  EXPECT_EQ(slots[0][2][2], id.str);
  EXPECT_NE(Run({"CLUSTER", "NODES"}).str.find(id.str + " "), std::string::npos);
  EXPECT_NE(Run({"CLUSTER", "INFO"}).str.find("cluster_state:ok\r\n"), std::string::npos);
  EXPECT_TRUE(Run({"CLUSTER", "KEYSLOT", "foo"}).is_integer(12182));
  EXPECT_TRUE(
      Run({"CLUSTER", "KEYSLOT", "{ns}_pk"}).is_integer(Run({"CLUSTER", "KEYSLOT", "ns"}).integer));
  EXPECT_EQ(Run({"READONLY"}), "OK");
  EXPECT_EQ(Run({"CLUSTER", "KEYSLOT"}).error(),
            "ERR wrong number of arguments for 'cluster|keyslot' command");
  EXPECT_EQ(Run({"CLUSTER", "NOPE"}).error(), "ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.");
}

}  // namespace
}  // namespace pion::server::testing
