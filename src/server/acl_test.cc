// Acl unit tests: rule parsing, key ownership of derived sids, the checks.
#include "server/acl.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

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

// Every command in the table: its categories agree with its flags, and every
// argument naming a key is reachable by the key check (a tenant cannot slip a
// key past its patterns through a command nobody classified).
TEST_F(AclTest, EveryCommandHasCategoriesConsistentWithItsFlags) {
  // Keyless commands that read or write data but filter by the user's patterns
  // (or touch none): the rest of the keyless data commands must be @dangerous.
  // KV.BLOCK.UNPIN acts on the caller's own leases only (another user's count 0).
  // LOLWUT is @read as in Redis and reads no data at all.
  const std::set<std::string_view> filtering = {
      "SCAN", "RANDOMKEY", "DBSIZE", "KV.PREFIX.COMMIT", "KV.BLOCK.UNPIN", "LOLWUT"};
  for (const CommandSpec& s : table_.specs()) {
    SCOPED_TRACE(s.name);
    std::string_view n = s.name;
    uint32_t c = CommandCategories(s);
    EXPECT_NE(!(c & kAclFast), !(c & kAclSlow)) << "exactly one of @fast, @slow";
    EXPECT_FALSE((s.flags & kCmdWrite) && (s.flags & kCmdReadonly));
    if (s.flags & kCmdWrite) {
      EXPECT_TRUE(c & kAclWrite);
    }
    if (s.flags & kCmdReadonly) {
      EXPECT_TRUE(c & kAclRead);
    }
    if (s.flags & kCmdAdmin) {
      EXPECT_TRUE((c & kAclAdmin) && (c & kAclDangerous));
    }
    // A family category besides the flags' (what +@<family> grants).
    uint32_t family = kAclKeyspace | kAclString | kAclBitmap | kAclKvcache | kAclAttend |
                      kAclConnection | kAclTransaction | kAclPubsub | kAclAdmin | kAclDangerous;
    if (n != "TIME" && n != "LOLWUT") {
      // TIME: @fast only, LOLWUT: @read @fast only, as Redis
      EXPECT_NE(c & family, 0u) << "no family category";
    }
    if (s.flags & kCmdKvcache) {
      EXPECT_NE(c & (kAclKvcache | kAclAttend | kAclString | kAclBitmap | kAclKeyspace), 0u);
    }
    if (n.starts_with("KV.PREFIX.") || n.starts_with("V.")) {
      EXPECT_TRUE(c & kAclKvcache);
    }
    if (n.starts_with("ATTEND.")) {
      EXPECT_TRUE(c & kAclAttend);
    }
    if (n == "MULTI" || n == "EXEC" || n == "DISCARD" || n == "WATCH" || n == "UNWATCH") {
      EXPECT_TRUE(c & kAclTransaction);
    }
    if (n == "KEYS" || n == "FLUSHALL" || n == "FLUSHDB" || n == "MONITOR" || n == "SLOWLOG" ||
        n == "LATENCY" || n == "CONFIG" || n == "INFO" || n == "ACL" || n == "SHUTDOWN") {
      EXPECT_TRUE(c & kAclDangerous);
    }
    if (s.first_key > 0) {
      // Keys need a defined permission: read, write, or (neither flag) both.
      EXPECT_TRUE((s.flags & (kCmdWrite | kCmdReadonly)) || (s.acl_key_flags & kAclKeyReadOnly));
      EXPECT_TRUE(s.last_key < 0 || s.last_key >= s.first_key);
      EXPECT_GE(s.key_step, 1);
      if (n.starts_with("KV.PREFIX.") || n.starts_with("V.") || n.starts_with("ATTEND.")) {
        EXPECT_TRUE(s.acl_key_flags & kAclKeyNamespace) << "a sid is checked as its namespace";
      }
    } else if ((s.flags & (kCmdWrite | kCmdReadonly)) && !(c & kAclDangerous)) {
      EXPECT_TRUE(filtering.count(n)) << "keyless data command neither filtered nor @dangerous";
    }
  }
}

TEST_F(AclTest, KeyPositionsCoverEveryKeyArgument) {
  std::string_view rules[] = {"on", "nopass", "~a|*", "+@all", "-@dangerous"};
  ASSERT_TRUE(acl_.SetUser("a", rules).ok());
  // MSET/MSETNX: every other argument is a key; values are not.
  EXPECT_EQ(Check("a", {"MSET", "a|1", "b|v", "a|2", "v"}), AclDenial::kNone);
  EXPECT_EQ(Check("a", {"MSET", "a|1", "v", "b|2", "v"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"MGET", "a|1", "b|2"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"EXISTS", "a|1", "a|2", "b|3"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"RENAME", "a|1", "b|1"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"WATCH", "a|1", "b|1"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"MEMORY", "USAGE", "b|1"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"MEMORY", "USAGE", "a|1"}), AclDenial::kNone);
  EXPECT_EQ(Check("a", {"MEMORY", "HELP"}), AclDenial::kNone);
  EXPECT_EQ(Check("a", {"ATTEND.PREFIX.LOOKUP", "a|x_attn", "0"}), AclDenial::kNone);
  EXPECT_EQ(Check("a", {"ATTEND.PREFIX.LOOKUP", "b|x_attn", "0"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"KV.PREFIX.WARM", "b|x", "0", "1"}), AclDenial::kKey);
  // WARM's optional attend_sid (argument 4) is a key too: its slots are written.
  EXPECT_EQ(Check("a", {"KV.PREFIX.WARM", "a|x", "8", "64"}), AclDenial::kNone);
  EXPECT_EQ(Check("a", {"KV.PREFIX.WARM", "a|x", "8", "64", "b|y_attn"}), AclDenial::kKey);
  EXPECT_EQ(Check("a", {"KV.PREFIX.WARM", "a|x", "8", "64", "a|y_attn"}), AclDenial::kNone);
  EXPECT_EQ(Check("a", {"KEYS", "*"}), AclDenial::kCommand);  // @dangerous
  EXPECT_EQ(Check("a", {"SCAN", "0"}), AclDenial::kNone);     // filters instead
}

TEST_F(AclTest, KeyFlagsRefineThePermission) {
  std::string_view w[] = {"on", "nopass", "%W~w*", "%R~r*", "~b|x_pk", "+@all"};
  ASSERT_TRUE(acl_.SetUser("u", w).ok());
  EXPECT_EQ(Check("u", {"SET", "w1", "v"}), AclDenial::kNone);
  EXPECT_EQ(Check("u", {"SET", "w1", "v", "GET"}), AclDenial::kKey);  // returns the old value
  EXPECT_EQ(Check("u", {"GETDEL", "w1"}), AclDenial::kKey);
  EXPECT_EQ(Check("u", {"APPEND", "w1", "x"}), AclDenial::kNone);
  // WATCH only tests its keys (Redis 7.0's RO key spec, no `access`): either will do.
  EXPECT_EQ(Check("u", {"WATCH", "r1"}), AclDenial::kNone);
  EXPECT_EQ(Check("u", {"WATCH", "w1"}), AclDenial::kNone);
  EXPECT_EQ(Check("u", {"WATCH", "x1"}), AclDenial::kKey);
  // COPY reads its source and writes its destination.
  EXPECT_EQ(Check("u", {"COPY", "r1", "w1"}), AclDenial::kNone);
  EXPECT_EQ(Check("u", {"COPY", "w1", "r1"}), AclDenial::kKey);
  EXPECT_EQ(Check("u", {"GET", "w1"}), AclDenial::kKey);
  // DEL of a sid drops its namespace: a pattern naming the sid alone is not enough.
  EXPECT_EQ(Check("u", {"DEL", "b|x_pk"}), AclDenial::kKey);
}

}  // namespace
}  // namespace pion::server
