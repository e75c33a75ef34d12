// Replies that Redis 7.0's own test suites check, in process: each test names
// the behaviour it pins (EXPIRE's option combinations, AUTH's texts, CLIENT
// KILL's filters, the introspection commands' argument errors).
#include <algorithm>
#include <string>
#include <vector>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class Conformance : public KvTest {};

TEST_F(Conformance, ExpireLtXxOnAKeyWithoutTtlSetsNothing) {
  for (const char* cmd : {"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"}) {
    SCOPED_TRACE(cmd);
    ASSERT_EQ(Run({"SET", "foo", "bar"}), "OK");
    std::string far = std::string(cmd).find("AT") != std::string::npos ? "99999999999" : "200000";
    EXPECT_TRUE(Run({cmd, "foo", far, "LT", "XX"}).is_integer(0));
    EXPECT_TRUE(Run({cmd, "foo", far, "XX", "LT"}).is_integer(0));
    EXPECT_TRUE(Run({"TTL", "foo"}).is_integer(-1));
    // With a TTL, LT XX lowers it and never raises it.
    ASSERT_TRUE(Run({"EXPIRE", "foo", "1000"}).is_integer(1));
    EXPECT_TRUE(Run({"EXPIRE", "foo", "2000", "LT", "XX"}).is_integer(0));
    EXPECT_TRUE(Run({"EXPIRE", "foo", "500", "XX", "LT"}).is_integer(1));
    RespValue ttl = Run({"TTL", "foo"});
    EXPECT_TRUE(ttl.type == RespValue::Type::kInteger && ttl.integer <= 500 && ttl.integer > 400)
        << ttl.Debug();
    ASSERT_TRUE(Run({"DEL", "foo"}).is_integer(1));
  }
  // GT XX is GT (a key without a TTL never passes GT).
  ASSERT_EQ(Run({"SET", "foo", "bar"}), "OK");
  EXPECT_TRUE(Run({"EXPIRE", "foo", "200", "GT", "XX"}).is_integer(0));
  EXPECT_TRUE(Run({"TTL", "foo"}).is_integer(-1));
  // LT alone sets a TTL on a key without one (no TTL is an infinite one).
  EXPECT_TRUE(Run({"EXPIRE", "foo", "200", "LT"}).is_integer(1));
}

TEST_F(Conformance, AuthWithoutAPasswordHasRedis7Text) {
  // redis-py maps this exact text to AuthenticationError.
  EXPECT_EQ(Run({"AUTH", "foo"}).error(),
            "ERR AUTH <password> called without any password configured for the default user. "
            "Are you sure your configuration is correct?");
}

TEST_F(Conformance, ClientKillUserMustNameAUser) {
  EXPECT_EQ(Run({"CLIENT", "KILL", "USER", "nosuch"}).error(), "ERR No such user 'nosuch'");
  // A known user with no client: nothing killed.
  ASSERT_EQ(Run({"ACL", "SETUSER", "u1", "on", "nopass", "+@all"}), "OK");
  EXPECT_TRUE(Run({"CLIENT", "KILL", "USER", "u1"}).is_integer(0));
}

// GETKEYSANDFLAGS: [[key, flags], ...]; the flags of key i as one string.
std::vector<std::string> KeyFlags(const RespValue& r) {
  std::vector<std::string> out;
  for (const RespValue& k : r.elems) {
    std::string f;
    for (const std::string& s : k[1].Strings()) f += (f.empty() ? "" : " ") + s;
    out.push_back(k[0].str + ": " + f);
  }
  return out;
}

TEST_F(Conformance, KeyFlagsAreRedis70KeySpecs) {
  using V = std::vector<std::string>;
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "SET", "k1", "v1"})), V{"k1: OW update"});
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "SET", "k1", "v1", "GET"})),
            V{"k1: RW access update"});
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "MSET", "k1", "v1", "k2", "v2"})),
            (V{"k1: OW update", "k2: OW update"}));
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "DEL", "k1", "k2"})),
            (V{"k1: RM delete", "k2: RM delete"}));
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "GETDEL", "k1"})),
            V{"k1: RW access delete"});
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "GET", "k1"})), V{"k1: RO access"});
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "RENAME", "a", "b"})),
            (V{"a: RW access delete", "b: OW update"}));
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "EXISTS", "a"})), V{"a: RO"});
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "SETNX", "a", "1"})), V{"a: OW insert"});
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "APPEND", "a", "1"})), V{"a: RW insert"});
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "EXPIRE", "a", "1"})), V{"a: RW update"});
  // pion's own commands keep the spec derived from their key range.
  EXPECT_EQ(KeyFlags(Run({"COMMAND", "GETKEYSANDFLAGS", "KV.PREFIX.DROP", "ns"})),
            V{"ns: RW access update"});

  // COMMAND INFO: the same specs (RENAME has two, in Redis's order).
  RespValue info = Run({"COMMAND", "INFO", "rename", "set", "mset"});
  ASSERT_EQ(info.size(), 3u) << info.Debug();
  const RespValue& rename = info[0][8];
  ASSERT_EQ(rename.size(), 2u) << rename.Debug();
  EXPECT_EQ(rename[0][1].Strings(), (V{"RW", "access", "delete"}));
  EXPECT_EQ(rename[1][1].Strings(), (V{"OW", "update"}));
  EXPECT_EQ(rename[1][3][3][1].integer, 2);  // begin_search index
  EXPECT_EQ(info[1][8][0][1].Strings(), (V{"RW", "access", "update", "variable_flags"}));
  const RespValue& mset = info[2][8][0];
  EXPECT_EQ(mset[1].Strings(), (V{"OW", "update"}));
  ASSERT_EQ(mset[5][3].size(), 6u);  // lastkey -1 keystep 2 limit 0
  EXPECT_EQ(mset[5][3][1].integer, -1);
  EXPECT_EQ(mset[5][3][3].integer, 2);
}

bool Has(const RespValue& info, std::string_view line) {
  return info.str.find(line) != std::string::npos;
}

TEST_F(Conformance, OomRefusalIsARejectedCall) {
  ASSERT_EQ(Run({"CONFIG", "RESETSTAT"}), "OK");
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  EXPECT_TRUE(Run({"SET", "a", "b"}).error().starts_with("OOM "));
  RespValue info = Run({"INFO", "commandstats"});
  EXPECT_TRUE(Has(info,
                  "cmdstat_set:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,"
                  "failed_calls=0"))
      << info.str;
  EXPECT_TRUE(Has(Run({"INFO", "errorstats"}), "errorstat_OOM:count=1"));
  ASSERT_EQ(Run({"CONFIG", "SET", "maxmemory", "0"}), "OK");
}

TEST_F(Conformance, CommandsInsideExecAreCountedOnTheirOwn) {
  ASSERT_EQ(Run({"CONFIG", "RESETSTAT"}), "OK");
  ASSERT_EQ(Run({"MULTI"}), "OK");
  ASSERT_EQ(Run({"SET", "a", "b"}), "QUEUED");
  ASSERT_EQ(Run({"AUTH", "a"}), "QUEUED");
  RespValue r = Run({"EXEC"});
  ASSERT_EQ(r.size(), 2u) << r.Debug();
  EXPECT_EQ(r[0], "OK");
  EXPECT_TRUE(r[1].error().starts_with("ERR AUTH")) << r.Debug();
  RespValue info = Run({"INFO", "commandstats"});
  EXPECT_TRUE(Has(info, "cmdstat_set:calls=1,")) << info.str;
  RespValue errors = Run({"INFO", "errorstats"});
  EXPECT_TRUE(Has(errors, "errorstat_ERR:count=1")) << errors.str;
  for (std::string_view cmd : {"set", "auth", "exec"}) {
    std::string head = "cmdstat_" + std::string(cmd) + ":calls=1,";
    size_t at = info.str.find(head);
    ASSERT_NE(at, std::string::npos) << cmd;
    std::string line = info.str.substr(at, info.str.find('\r', at) - at);
    EXPECT_TRUE(line.ends_with(cmd == "auth" ? "rejected_calls=0,failed_calls=1"
                                             : "rejected_calls=0,failed_calls=0"))
        << line;
  }
}

TEST_F(Conformance, SubcommandArityAndSyntaxErrors) {
  EXPECT_EQ(Run({"LATENCY", "HELP", "xxx"}).error(),
            "ERR wrong number of arguments for 'latency|help' command");
  EXPECT_EQ(Run({"LATENCY", "LATEST", "xxx"}).error(),
            "ERR wrong number of arguments for 'latency|latest' command");
  EXPECT_EQ(Run({"LATENCY", "HISTORY"}).error(),
            "ERR wrong number of arguments for 'latency|history' command");
  EXPECT_EQ(Run({"LATENCY", "NOPE"}).error(), "ERR unknown subcommand 'NOPE'. Try LATENCY HELP.");
  EXPECT_GT(Run({"LATENCY", "HELP"}).size(), 2u);
  EXPECT_EQ(Run({"ACL", "HELP", "xxx"}).error(),
            "ERR wrong number of arguments for 'acl|help' command");
  EXPECT_GT(Run({"ACL", "HELP"}).size(), 2u);
  EXPECT_EQ(Run({"ACL", "CAT", "NON_EXISTS"}).error(), "ERR Unknown category 'NON_EXISTS'");
  EXPECT_EQ(Run({"ACL", "CAT", "NON_EXISTS", "NON_EXISTS2"}).error(),
            "ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.");
  EXPECT_EQ(Run({"ACL", "GENPASS", "64", "1"}).error(),
            "ERR unknown subcommand or wrong number of arguments for 'GENPASS'. Try ACL HELP.");
}

TEST_F(Conformance, MemoryUsageSamples) {
  ASSERT_EQ(Run({"SET", "k", "v"}), "OK");
  EXPECT_EQ(Run({"MEMORY", "USAGE", "k", "SAMPLES", "-1"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"MEMORY", "USAGE", "k", "SAMPLES", "x"}).error(),
            "ERR value is not an integer or out of range");
  EXPECT_EQ(Run({"MEMORY", "USAGE", "k", "SAMPLES"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"MEMORY", "USAGE", "k", "NOPE", "1"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"MEMORY", "USAGE"}).error(),
            "ERR wrong number of arguments for 'memory|usage' command");
  RespValue n = Run({"MEMORY", "USAGE", "k", "SAMPLES", "0", "SAMPLES", "5"});
  EXPECT_EQ(n.type, RespValue::Type::kInteger) << n.Debug();
  EXPECT_GT(n.integer, 0);
}

TEST_F(Conformance, ScanCursorIsReadAsAnUnsigned64BitNumber) {
  ASSERT_EQ(Run({"SET", "k", "v"}), "OK");
  for (const char* cur : {"-1", "18446744073709551615", "+0", "0"}) {
    RespValue r = Run({"SCAN", cur});
    ASSERT_EQ(r.size(), 2u) << cur << " " << r.Debug();
  }
  for (const char* bad : {"18446744073709551616", "abc", " 1", "1 ", "-", "1.5"})
    EXPECT_EQ(Run({"SCAN", bad}).error(), "ERR invalid cursor") << bad;
}

TEST_F(Conformance, ConfigGetReplicaofAndItsAlias) {
  RespValue r = Run({"CONFIG", "GET", "maxmemory", "maxmemory*", "bind", "*of"});
  ASSERT_NE(r.Find("replicaof"), nullptr) << r.Debug();
  ASSERT_NE(r.Find("slaveof"), nullptr) << r.Debug();
  EXPECT_EQ(*r.Find("replicaof"), "");
  EXPECT_EQ(*r.Find("slaveof"), "");
  ASSERT_NE(r.Find("maxmemory-samples"), nullptr);
  ASSERT_NE(r.Find("maxmemory-clients"), nullptr);
  ASSERT_NE(r.Find("bind"), nullptr);
  // No duplicates.
  std::vector<std::string> names;
  for (size_t i = 0; i < r.size(); i += 2) names.push_back(r[i].str);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

TEST_F(Conformance, InfoFieldsToolsRead) {
  RespValue mem = Run({"INFO", "memory"});
  EXPECT_TRUE(Has(mem, "mem_allocator:libc\r\n")) << mem.str;
  EXPECT_TRUE(Has(mem, "lazyfree_pending_objects:0\r\n")) << mem.str;
  RespValue p0 = Run({"INFO", "persistence"});
  ASSERT_TRUE(Has(p0, "rdb_changes_since_last_save:")) << p0.str;
  auto changes = [this] {
    std::string s = Run({"INFO", "persistence"}).str;
    size_t at = s.find("rdb_changes_since_last_save:");
    return std::stoull(s.substr(at + 28));
  };
  uint64_t before = changes();
  ASSERT_EQ(Run({"SET", "a", "1"}), "OK");
  ASSERT_TRUE(Run({"DEL", "a"}).is_integer(1));
  EXPECT_EQ(changes(), before + 2);
}

TEST_F(Conformance, ClientListCountsTheRunningCommandInQbuf) {
  // As Redis: the caller's query buffer holds "*2\r\n$6\r\nclient\r\n$4\r\nlist\r\n".
  RespValue info = Run({"CLIENT", "INFO"});
  EXPECT_TRUE(Has(info, " qbuf=26 ")) << info.str;
  RespValue list = Run({"CLIENT", "LIST"});
  EXPECT_TRUE(Has(list, " qbuf=26 ")) << list.str;
  EXPECT_TRUE(Has(list, " cmd=client|list ")) << list.str;
}

TEST_F(Conformance, ConfigSetRequirepassAtRunTime) {
  ASSERT_EQ(Run({"CONFIG", "SET", "requirepass", "foobar"}), "OK");
  EXPECT_EQ(Run({"PING"}), "PONG");  // this connection stays authenticated
  EXPECT_EQ(*Run({"CONFIG", "GET", "requirepass"}).Find("requirepass"), "foobar");
  SwitchClient(1);  // a new connection must authenticate
  EXPECT_EQ(Run({"PING"}).error(), "NOAUTH Authentication required.");
  EXPECT_EQ(Run({"AUTH", "wrong"}).error(),
            "WRONGPASS invalid username-password pair or user is disabled.");
  EXPECT_EQ(Run({"AUTH", "foobar"}), "OK");
  EXPECT_EQ(Run({"PING"}), "PONG");
  // A new password replaces the old one; "" makes the default user nopass again.
  ASSERT_EQ(Run({"CONFIG", "SET", "requirepass", "other"}), "OK");
  EXPECT_EQ(Run({"AUTH", "foobar"}).error(),
            "WRONGPASS invalid username-password pair or user is disabled.");
  EXPECT_EQ(Run({"AUTH", "other"}), "OK");
  ASSERT_EQ(Run({"CONFIG", "SET", "requirepass", ""}), "OK");
  EXPECT_TRUE(Run({"AUTH", "x"}).error().starts_with("ERR AUTH <password> called without"));
  EXPECT_TRUE(server().default_user_open());
}

std::string NoPerm(std::string_view cmd) {
  return "This user has no permissions to run the '" + std::string(cmd) + "' command";
}

TEST_F(Conformance, AclSubcommandRules) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "u", "on", "nopass", "~*", "+@all", "-config|set"}), "OK");
  ASSERT_EQ(
      Run({"ACL", "SETUSER", "v", "on", "nopass", "~*", "-@all", "+config|get", "+client|id"}),
      "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "u", "CONFIG", "SET", "timeout", "1"}), NoPerm("config|set"));
  EXPECT_EQ(Run({"ACL", "DRYRUN", "u", "CONFIG", "GET", "timeout"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "u", "GET", "k"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "v", "CONFIG", "GET", "timeout"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "v", "config", "set", "timeout", "1"}), NoPerm("config|set"));
  EXPECT_EQ(Run({"ACL", "DRYRUN", "v", "CLIENT", "ID"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "v", "CLIENT", "LIST"}), NoPerm("client|list"));
  EXPECT_EQ(Run({"ACL", "DRYRUN", "v", "GET", "k"}), NoPerm("get"));
  // Run as v: the refusal names the subcommand, and ACL LOG logs it so.
  SwitchClient(1);
  ASSERT_EQ(Run({"AUTH", "v", "any"}), "OK");
  EXPECT_EQ(*Run({"CONFIG", "GET", "timeout"}).Find("timeout"), "0");
  EXPECT_EQ(Run({"CONFIG", "SET", "timeout", "1"}).error(),
            "NOPERM this user has no permissions to run the 'config|set' command");
  SwitchClient(0);
  RespValue log = Run({"ACL", "LOG", "1"});
  ASSERT_EQ(log.size(), 1u) << log.Debug();
  EXPECT_EQ(*log[0].Find("object"), "config|set");
  // +config makes the whole command allowed again; -config denies every subcommand.
  ASSERT_EQ(Run({"ACL", "SETUSER", "v", "+config"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "v", "CONFIG", "SET", "timeout", "1"}), "OK");
  ASSERT_EQ(Run({"ACL", "SETUSER", "v", "-config"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "v", "CONFIG", "GET", "timeout"}), NoPerm("config|get"));
  // A category rule covers the subcommands too.
  ASSERT_EQ(Run({"ACL", "SETUSER", "u", "-@admin"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "u", "CONFIG", "GET", "timeout"}), NoPerm("config|get"));
  // A first argument of a command without subcommands (Redis: +select|0).
  ASSERT_EQ(Run({"ACL", "SETUSER", "x", "on", "nopass", "-@all", "+select|0"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "x", "SELECT", "0"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "x", "SELECT", "1"}), NoPerm("select"));
  // Errors, as Redis.
  EXPECT_EQ(Run({"ACL", "SETUSER", "x", "+config|get|x"}).error(),
            "ERR Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of a "
            "subcommand is not supported");
  EXPECT_EQ(Run({"ACL", "SETUSER", "x", "+config|"}).error(),
            "ERR Error in ACL SETUSER modifier '+config|': Syntax error");
  EXPECT_EQ(Run({"ACL", "SETUSER", "x", "+nosuch|get"}).error(),
            "ERR Error in ACL SETUSER modifier '+nosuch|get': Unknown command or category name "
            "in ACL");
}

// Redis 7.0: a container command takes subcommands only, not first arguments;
// a rule naming three levels names no command.
TEST_F(Conformance, AclContainerRulesTakeOnlySubcommands) {
  const std::string unknown = "Unknown command or category name in ACL";
  ASSERT_EQ(Run({"ACL", "SETUSER", "c", "+@all", "+config|get"}), "OK");
  for (const char* rule : {"+config|asdf", "-config|asdf", "+get|key1|key2", "-get|key1|key2",
                           "-config|get|x", "+xinfo|nosuch"}) {
    EXPECT_EQ(Run({"ACL", "SETUSER", "c", "+@all", rule}).error(),
              "ERR Error in ACL SETUSER modifier '" + std::string(rule) + "': " + unknown)
        << rule;
  }
  // A Redis subcommand pion lacks still loads (kept without effect).
  EXPECT_EQ(Run({"ACL", "SETUSER", "c", "-client|no-evict", "+memory|doctor"}), "OK");
  // A first argument of a command without subcommands is still one.
  EXPECT_EQ(Run({"ACL", "SETUSER", "c", "-@all", "+select|0"}), "OK");
}

// ACL LOG's context: "multi" for a command refused while queueing a MULTI or
// when EXEC runs it; repeats are merged per context; ACL LOG <count>.
TEST_F(Conformance, AclLogContextAndCount) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "t", "on", "nopass", "~*", "+@all", "-incr"}), "OK");
  SwitchClient(1);
  ASSERT_EQ(Run({"AUTH", "t", "x"}), "OK");
  EXPECT_TRUE(Run({"INCR", "a"}).error().starts_with("NOPERM"));
  EXPECT_TRUE(Run({"INCR", "a"}).error().starts_with("NOPERM"));
  ASSERT_EQ(Run({"MULTI"}), "OK");
  EXPECT_TRUE(Run({"INCR", "a"}).error().starts_with("NOPERM"));
  EXPECT_TRUE(Run({"EXEC"}).error().starts_with("EXECABORT"));
  SwitchClient(0);
  RespValue log = Run({"ACL", "LOG"});
  ASSERT_EQ(log.size(), 2u) << log.Debug();
  EXPECT_EQ(*log[0].Find("context"), "multi");
  EXPECT_EQ(*log[0].Find("object"), "incr");
  EXPECT_TRUE(log[0].Find("count")->is_integer(1));
  EXPECT_EQ(*log[1].Find("context"), "toplevel");
  EXPECT_TRUE(log[1].Find("count")->is_integer(2));
  EXPECT_EQ(Run({"ACL", "LOG", "1"}).size(), 1u);
  // A repeat of the older entry moves it to the front.
  SwitchClient(1);
  EXPECT_TRUE(Run({"INCR", "a"}).error().starts_with("NOPERM"));
  SwitchClient(0);
  log = Run({"ACL", "LOG"});
  ASSERT_EQ(log.size(), 2u) << log.Debug();
  EXPECT_EQ(*log[0].Find("context"), "toplevel");
  EXPECT_TRUE(log[0].Find("count")->is_integer(3));
  // Refused when EXEC runs it (the rule changed after queueing).
  ASSERT_EQ(Run({"ACL", "SETUSER", "t", "+incr"}), "OK");
  ASSERT_EQ(Run({"ACL", "LOG", "RESET"}), "OK");
  SwitchClient(1);
  ASSERT_EQ(Run({"MULTI"}), "OK");
  ASSERT_EQ(Run({"INCR", "a"}), "QUEUED");
  SwitchClient(0);
  ASSERT_EQ(Run({"ACL", "SETUSER", "t", "-incr"}), "OK");
  SwitchClient(1);
  Run({"EXEC"});
  SwitchClient(0);
  log = Run({"ACL", "LOG"});
  ASSERT_EQ(log.size(), 1u) << log.Debug();
  EXPECT_EQ(*log[0].Find("context"), "multi");
}

TEST_F(Conformance, AclRulesNamingRedisCommandsPionLacksAreKeptWithoutEffect) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "w", "on", "nopass", "~*", "+@all", "-debug", "-eval",
                 "+subscribe", "-script|flush", "-FLUSHALL"}),
            "OK");
  RespValue g = Run({"ACL", "GETUSER", "w"});
  ASSERT_NE(g.Find("commands"), nullptr) << g.Debug();
  EXPECT_EQ(*g.Find("commands"), "+@all -debug -eval +subscribe -script|flush -flushall");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "w", "GET", "k"}), "OK");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "w", "FLUSHALL"}), NoPerm("flushall"));
  EXPECT_EQ(Run({"ACL", "SETUSER", "w", "+nosuchcommand"}).error(),
            "ERR Error in ACL SETUSER modifier '+nosuchcommand': Unknown command or category "
            "name in ACL");
}

}  // namespace
}  // namespace pion::server::testing
