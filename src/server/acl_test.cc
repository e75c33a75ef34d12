// Acl unit tests: rule parsing, key ownership of derived sids, the checks.
#include "server/acl.h"

#include <gtest/gtest.h>

#include "server/commands/command_table.h"

namespace pion::server {
namespace {

class AclTest : public ::testing::Test {
 protected:
  AclTest() : table_(AllCommands()), acl_(&table_) {}
  size_t Index(const char* name) {
    return static_cast<size_t>(table_.Find(name) - table_.specs().data());
  }
  AclDenial Check(const char* user, std::vector<std::string_view> args) {
    auto u = acl_.Find(user);
    const CommandSpec* s = table_.Find(args[0]);
    std::string_view key;
    return Acl::Check(*u, *s, Index(s->name), args, &key);
  }
  CommandTable table_;
  Acl acl_;
};

TEST_F(AclTest, DefaultUserIsUnrestricted) {
  auto d = acl_.Default();
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->unrestricted);
  EXPECT_EQ(d->Describe(), "on nopass ~* &* +@all");
}

TEST_F(AclTest, KeyOwnerStripsDerivedSuffixes) {
  EXPECT_EQ(AclKeyOwner("a|x_pk"), "a|x");
  EXPECT_EQ(AclKeyOwner("a|x_pv"), "a|x");
  EXPECT_EQ(AclKeyOwner("a|x_attn"), "a|x");
  EXPECT_EQ(AclKeyOwner("a|x"), "a|x");
  EXPECT_EQ(AclKeyOwner("_pk"), "_pk");  // nothing left: its own name
}

TEST_F(AclTest, TenantPatternsApplyToNamespacesAndSids) {
  std::string_view rules[] = {"on", "nopass", "~a|*", "+@all", "-@dangerous"};
  ASSERT_TRUE(acl_.SetUser("a", rules).ok());
  EXPECT_EQ(Check("a", {"KV.PREFIX.LOOKUP", "a|x"}), AclDenial::kNone);
  EXPECT_EQ(Check("a", {"KV.PREFIX.LOOKUP", "b|x"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"V.INFO", "a|x_pk"}), AclDenial::kNone);
  EXPECT_EQ(Check("a", {"V.INFO", "b|x_pv"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"KV.PREFIX.DROP", "a|1", "a|2", "b|3"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"FLUSHALL"}), AclDenial::kCommand);
  EXPECT_FALSE(acl_.Find("a")->unrestricted);
}

TEST_F(AclTest, ReadAndWritePatternsCombine) {
  std::string_view rules[] = {"on", "%R~r*", "%W~r1", "+@all"};
  ASSERT_TRUE(acl_.SetUser("u", rules).ok());
  auto u = acl_.Find("u");
  EXPECT_TRUE(u->KeyAllowed("r1", kAclPermRead | kAclPermWrite));
  EXPECT_TRUE(u->KeyAllowed("r2", kAclPermRead));
  EXPECT_FALSE(u->KeyAllowed("r2", kAclPermWrite));
  EXPECT_EQ(u->KeysDescription(), "%R~r* %W~r1");
}

TEST_F(AclTest, FailedRulesChangeNothing) {
  std::string_view ok[] = {"on", ">pw", "~k*", "+ping"};
  ASSERT_TRUE(acl_.SetUser("v", ok).ok());
  std::string before = acl_.Find("v")->Describe();
  std::string_view bad[] = {"off", "+nosuch"};
  Status st = acl_.SetUser("v", bad);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(acl_.Find("v")->Describe(), before);
  EXPECT_NE(acl_.Authenticate("v", "pw"), nullptr);
  EXPECT_EQ(acl_.Authenticate("v", "nope"), nullptr);
}

TEST_F(AclTest, EpochMovesOnEveryChange) {
  uint64_t e = acl_.epoch();
  std::string_view r[] = {"on"};
  ASSERT_TRUE(acl_.SetUser("w", r).ok());
  EXPECT_GT(acl_.epoch(), e);
  e = acl_.epoch();
  std::string_view names[] = {"w"};
  EXPECT_EQ(*acl_.DelUsers(names), 1);
  EXPECT_GT(acl_.epoch(), e);
}

TEST_F(AclTest, LoadLinesIsAllOrNothing) {
  std::vector<std::string> good = {"user t on nopass ~t|* +@all", ""};
  ASSERT_TRUE(acl_.LoadLines(good, "f").ok());
  EXPECT_NE(acl_.Find("t"), nullptr);
  EXPECT_NE(acl_.Find("default"), nullptr);  // always there
  std::vector<std::string> bad = {"user x on", "user y bogus"};
  Status st = acl_.LoadLines(bad, "f");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("f:2:"), std::string::npos);
  EXPECT_NE(acl_.Find("t"), nullptr);
  EXPECT_EQ(acl_.Find("x"), nullptr);
}

}  // namespace
}  // namespace pion::server
