// ACL selectors (ACL SETUSER ... (<rules>)) and the per-key permissions of
// Redis's commands (read for an `access` key, write for an inserted, updated
// or deleted one, either for a key only tested), as Redis 7.0 checks them.
#include <string>
#include <vector>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class AclSelectorsTest : public KvTest {
 protected:
  // Runs `args` as `user` on client 1 (client 0 stays the default user).
  RespValue As(const std::string& user, std::initializer_list<std::string_view> args) {
    SwitchClient(1);
    RespValue auth = Run({"AUTH", user, "pw"});
    EXPECT_EQ(auth, "OK") << auth.Debug();
    RespValue r = Run(args);
    SwitchClient(0);
    return r;
  }
  // GETUSER's value for `field` (a flat array in RESP2).
  RespValue Field(const std::string& user, std::string_view field) {
    RespValue u = Run({"ACL", "GETUSER", user});
    const RespValue* f = u.Find(field);
    return f != nullptr ? *f : RespValue();
  }
};

TEST_F(AclSelectorsTest, ASelectorGrantsWhatTheRootDoesNot) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "s1", "on", ">pw", "-@all", "resetkeys"}), "OK");
  EXPECT_EQ(As("s1", {"SET", "write::foo", "bar"}).error().substr(0, 6), "NOPERM");
  ASSERT_EQ(Run({"ACL", "SETUSER", "s1", "(+@write ~write::*)", "(+@read ~read::*)"}), "OK");
  EXPECT_EQ(As("s1", {"SET", "write::foo", "bar"}), "OK");
  EXPECT_EQ(As("s1", {"GET", "read::foo"}).type, RespValue::Type::kNull);
  // Neither selector allows all of it: the key refusal is reported.
  EXPECT_EQ(As("s1", {"GET", "write::foo"}).error(),
            "NOPERM this user has no permissions to access one of the keys used as arguments");
  EXPECT_EQ(As("s1", {"SET", "read::foo", "bar"}).error(),
            "NOPERM this user has no permissions to access one of the keys used as arguments");
}

TEST_F(AclSelectorsTest, GetuserListAndDefaults) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "d", "reset", "()"}), "OK");
  RespValue sels = Field("d", "selectors");
  ASSERT_EQ(sels.size(), 1u) << sels.Debug();
  EXPECT_EQ(*sels[0].Find("commands"), "-@all");
  EXPECT_EQ(*sels[0].Find("keys"), "");
  EXPECT_EQ(*sels[0].Find("channels"), "");

  ASSERT_EQ(Run({"ACL", "SETUSER", "info", "-@all", "+get", "resetchannels", "&channel1", "%R~foo1",
                 "%W~bar1", "~baz1"}),
            "OK");
  ASSERT_EQ(
      Run({"ACL", "SETUSER", "info", "(-@all +set resetchannels &channel2 %R~foo2 %W~bar2 ~baz2)"}),
      "OK");
  EXPECT_EQ(Field("info", "keys"), "%R~foo1 %W~bar1 ~baz1");
  EXPECT_EQ(Field("info", "channels"), "&channel1");
  EXPECT_EQ(Field("info", "commands"), "-@all +get");
  sels = Field("info", "selectors");
  ASSERT_EQ(sels.size(), 1u);
  EXPECT_EQ(*sels[0].Find("keys"), "%R~foo2 %W~bar2 ~baz2");
  EXPECT_EQ(*sels[0].Find("channels"), "&channel2");
  EXPECT_EQ(*sels[0].Find("commands"), "-@all +set");
  // ACL LIST writes each selector in parentheses after the root's rules, and
  // such a line loads back as it was.
  std::string line;
  for (const std::string& l : Run({"ACL", "LIST"}).Strings())
    if (l.rfind("user info ", 0) == 0) line = l;
  EXPECT_EQ(line,
            "user info off %R~foo1 %W~bar1 ~baz1 resetchannels &channel1 -@all +get "
            "(%R~foo2 %W~bar2 ~baz2 resetchannels &channel2 -@all +set)");

  ASSERT_EQ(Run({"ACL", "SETUSER", "info", "clearselectors"}), "OK");
  EXPECT_EQ(Field("info", "selectors").size(), 0u);
}

TEST_F(AclSelectorsTest, SelectorSyntax) {
  // One argument or several: both make one selector.
  ASSERT_EQ(
      Run({"ACL", "SETUSER", "f", "(~key1 +get )", "( ~key2 +get )", "(", "~key3", "+get", ")"}),
      "OK");
  RespValue sels = Field("f", "selectors");
  ASSERT_EQ(sels.size(), 3u) << sels.Debug();
  EXPECT_EQ(*sels[0].Find("keys"), "~key1");
  EXPECT_EQ(*sels[1].Find("keys"), "~key2");
  EXPECT_EQ(*sels[2].Find("keys"), "~key3");
  // Errors name the whole selector; nothing is applied.
  EXPECT_EQ(Run({"ACL", "SETUSER", "bad", "on", "(this-is-invalid)"}).error(),
            "ERR Error in ACL SETUSER modifier '(this-is-invalid)': Syntax error");
  EXPECT_EQ(Run({"ACL", "SETUSER", "bad", "on", "(&* &fail)"}).error().substr(0, 57),
            "ERR Error in ACL SETUSER modifier '(&* &fail)': Adding a ");
  EXPECT_EQ(Run({"ACL", "GETUSER", "bad"}).type, RespValue::Type::kNull);
  EXPECT_EQ(Run({"ACL", "SETUSER", "bad", "("}).error(),
            "ERR Unmatched parenthesis in acl selector starting at '('.");
  EXPECT_EQ(Run({"ACL", "SETUSER", "bad", ")"}).error(),
            "ERR Error in ACL SETUSER modifier ')': Syntax error");
  EXPECT_EQ(Run({"ACL", "SETUSER", "bad", " () "}).error(),
            "ERR Error in ACL SETUSER modifier ' () ': Syntax error");
  // User-level rules do not belong in a selector.
  EXPECT_EQ(Run({"ACL", "SETUSER", "bad", "(on)"}).error(),
            "ERR Error in ACL SETUSER modifier '(on)': Syntax error");
}

TEST_F(AclSelectorsTest, LogNamesTheMostSpecificRefusal) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "lg", "on", ">pw", "+mget", "~key", "(+mget ~key ~otherkey)"}),
            "OK");
  ASSERT_EQ(Run({"ACL", "LOG", "RESET"}), "OK");
  EXPECT_EQ(As("lg", {"GET", "key"}).error(),
            "NOPERM this user has no permissions to run the 'get' command");
  EXPECT_EQ(*Run({"ACL", "LOG"})[0].Find("object"), "get");
  ASSERT_EQ(Run({"ACL", "LOG", "RESET"}), "OK");
  EXPECT_EQ(As("lg", {"MGET", "otherkey", "someotherkey"}).error().substr(0, 6), "NOPERM");
  RespValue e = Run({"ACL", "LOG"})[0];
  EXPECT_EQ(*e.Find("reason"), "key");
  EXPECT_EQ(*e.Find("object"), "someotherkey");
}

TEST_F(AclSelectorsTest, KeyPermissionsFollowRedisKeySpecs) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "kp", "on", ">pw", "+@all", "%R~read*", "%W~write*", "%RW~rw*"}),
            "OK");
  // Tested keys (EXISTS, TYPE, TOUCH, STRLEN, MEMORY USAGE): either permission.
  for (const char* k : {"read", "write", "rw"}) {
    SCOPED_TRACE(k);
    EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "TOUCH", k}), "OK");
    EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "EXISTS", k}), "OK");
    EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "TYPE", k}), "OK");
    EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "STRLEN", k}), "OK");
    EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "MEMORY", "USAGE", k}), "OK");
  }
  EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "EXISTS", "nothing"}),
            "This user has no permissions to access the 'nothing' key");
  // COPY reads its source and writes its destination.
  EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "COPY", "read", "write"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "COPY", "write", "read"}),
            "This user has no permissions to access the 'write' key");
  // BITFIELD reads only while every operation is a GET.
  EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "BITFIELD", "readstr", "GET", "u4", "0"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "BITFIELD", "readstr", "SET", "u4", "0", "1"}),
            "This user has no permissions to access the 'readstr' key");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "BITFIELD", "writestr", "GET", "u4", "0"}),
            "This user has no permissions to access the 'writestr' key");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "kp", "BITFIELD", "rwstr", "INCRBY", "u4", "0", "1"}), "OK");
}

TEST_F(AclSelectorsTest, PercentPatternsAsRedisParsesThem) {
  // "%RW" with no '~' is accepted: read and write of no key.
  ASSERT_EQ(Run({"ACL", "SETUSER", "np", "on", ">pw", "%RW", "+@all"}), "OK");
  EXPECT_EQ(As("np", {"SET", "x", "5"}).error(),
            "NOPERM this user has no permissions to access one of the keys used as arguments");
  EXPECT_EQ(Run({"ACL", "SETUSER", "np", "%~"}).error(),
            "ERR Error in ACL SETUSER modifier '%~': Syntax error");
  EXPECT_EQ(Run({"ACL", "SETUSER", "np", "%"}).error(),
            "ERR Error in ACL SETUSER modifier '%': Syntax error");
  EXPECT_EQ(Run({"ACL", "SETUSER", "np", "%RR~x"}).error(),
            "ERR Error in ACL SETUSER modifier '%RR~x': Syntax error");
}

// What Redis's unit/acl checks of subcommand rules, as the user they name.
TEST_F(AclSelectorsTest, AclIncludeSingleSubcommands) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "nu", "on", ">pw", "~*", "&*", "+@all", "-client"}), "OK");
  ASSERT_EQ(Run({"ACL", "SETUSER", "nu", "+client|id", "+client|setname"}), "OK");
  EXPECT_EQ(Field("nu", "commands"), "+@all -client +client|id +client|setname");
  EXPECT_EQ(As("nu", {"CLIENT", "SETNAME", "foo"}), "OK");
  EXPECT_EQ(As("nu", {"CLIENT", "KILL", "TYPE", "master"}).error(),
            "NOPERM this user has no permissions to run the 'client|kill' command");
  ASSERT_EQ(Run({"ACL", "SETUSER", "nu", "+@all", "-client|kill"}), "OK");
  EXPECT_EQ(Field("nu", "commands"), "+@all -client|kill");
  EXPECT_EQ(As("nu", {"CLIENT", "KILL", "TYPE", "master"}).error(),
            "NOPERM this user has no permissions to run the 'client|kill' command");
  ASSERT_EQ(Run({"ACL", "SETUSER", "nu", "-@all", "+acl", "+config", "-config|set"}), "OK");
  EXPECT_EQ(As("nu", {"CONFIG", "SET", "loglevel", "debug"}).error(),
            "NOPERM this user has no permissions to run the 'config|set' command");
  ASSERT_EQ(Run({"ACL", "SETUSER", "nu", "-@all", "+acl", "+select|0"}), "OK");
  EXPECT_EQ(As("nu", {"SELECT", "0"}), "OK");
  EXPECT_EQ(As("nu", {"SELECT", "1"}).error(),
            "NOPERM this user has no permissions to run the 'select' command");
}

TEST_F(AclSelectorsTest, AWholeCommandEngulfsItsSubcommandRules) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "bob", "+memory|doctor"}), "OK");
  EXPECT_EQ(Field("bob", "commands"), "-@all +memory|doctor");
  ASSERT_EQ(Run({"ACL", "SETUSER", "bob", "+memory"}), "OK");
  EXPECT_EQ(Field("bob", "commands"), "-@all +memory");
  ASSERT_EQ(Run({"ACL", "SETUSER", "bob", "+@all", "+client|id"}), "OK");
  EXPECT_EQ(Field("bob", "commands"), "+@all");
  ASSERT_EQ(Run({"ACL", "SETUSER", "alice", "on", ">pw", "+@all", "-memory|doctor"}), "OK");
  EXPECT_EQ(Field("alice", "commands"), "+@all -memory|doctor");
  EXPECT_EQ(As("alice", {"MEMORY", "DOCTOR"}).error(),
            "NOPERM this user has no permissions to run the 'memory|doctor' command");
  EXPECT_EQ(As("alice", {"MEMORY", "STATS"}).type, RespValue::Type::kArray);
  ASSERT_EQ(Run({"ACL", "SETUSER", "alice", "+@all", "-memory"}), "OK");
  EXPECT_EQ(Field("alice", "commands"), "+@all -memory");
}

TEST_F(AclSelectorsTest, ClientAdminSubcommandsFollowTheirOwnCategories) {
  // +client grants CLIENT LIST (Redis: client|list is @admin, and in CLIENT).
  ASSERT_EQ(Run({"ACL", "SETUSER", "ps", "on", ">pw", "+acl", "+client", "+@pubsub"}), "OK");
  EXPECT_EQ(As("ps", {"CLIENT", "LIST"}).type, RespValue::Type::kBulk);
  // -@admin takes CLIENT LIST, KILL, PAUSE... and leaves CLIENT ID.
  ASSERT_EQ(Run({"ACL", "SETUSER", "na", "on", ">pw", "+@all", "-@admin"}), "OK");
  EXPECT_EQ(As("na", {"CLIENT", "LIST"}).error(),
            "NOPERM this user has no permissions to run the 'client|list' command");
  EXPECT_EQ(As("na", {"CLIENT", "PAUSE", "1"}).error(),
            "NOPERM this user has no permissions to run the 'client|pause' command");
  EXPECT_EQ(As("na", {"CLIENT", "ID"}).type, RespValue::Type::kInteger);
}

}  // namespace
}  // namespace pion::server::testing
